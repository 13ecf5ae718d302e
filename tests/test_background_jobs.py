"""Periodic jobs."""

from datetime import timedelta

import httpx
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.background import (
    prune_ended_orders,
    prune_idempotency_keys,
    prune_published_events,
    prune_webhook_events,
    replica_jobs,
)
from app.core.clock import utcnow
from app.core.states import DeliveryStatus
from app.services import published_events
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import (
    IdempotencyKey,
    Order,
    PublishedEvent,
    WebhookDelivery,
    WebhookEvent,
)
from tests.factories import create_account, order_body, place_order


async def test_idempotency_keys_older_than_a_day_are_pruned(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    account = await create_account(client)
    for key in ("old", "fresh"):
        response = await client.post(
            "/v1/orders", json=order_body(), headers={**account.headers, "Idempotency-Key": key}
        )
        assert response.status_code == 201
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        await session.execute(
            update(IdempotencyKey)
            .where(IdempotencyKey.key == "old")
            .values(created_at=utcnow() - timedelta(hours=24, minutes=1))
        )
    assert await prune_idempotency_keys(maker) == 1
    async with session_scope(maker) as session:
        keys = (await session.execute(select(IdempotencyKey.key))).scalars().all()
        assert keys == ["fresh"]
        assert await session.scalar(select(func.count()).select_from(IdempotencyKey)) == 1


def test_every_replica_prunes_on_the_hour_not_at_start_up(engine: AsyncEngine) -> None:
    jobs = {
        job.name: job for job in replica_jobs(create_sessionmaker(engine), order_retention_days=30)
    }
    assert set(jobs) == {
        "prune idempotency keys",
        "prune webhook events",
        "prune stream events",
        "prune ended orders",
    }
    assert all(job.seconds == 3600 and not job.at_once for job in jobs.values())
    assert jobs["prune ended orders"].run.keywords == {"retention_days": 30}  # type: ignore[attr-defined]


async def test_delivered_webhook_events_older_than_30_days_are_pruned_pending_ones_kept(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    account = await create_account(client)
    created = await client.post(
        "/v1/webhook-endpoints", json={"url": "https://203.0.114.9/h"}, headers=account.headers
    )
    assert created.status_code == 201
    for _ in range(2):
        order = await client.post("/v1/orders", json=order_body(), headers=account.headers)
        await client.post(f"/v1/orders/{order.json()['id']}/cancel", headers=account.headers)
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        delivered, pending = (await session.execute(select(WebhookEvent.id))).scalars().all()
        await session.execute(update(WebhookEvent).values(created_at=utcnow() - timedelta(days=31)))
        await session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.event_id == delivered)
            .values(status=DeliveryStatus.SUCCEEDED)
        )
    assert await prune_webhook_events(maker) == 1
    async with session_scope(maker) as session:
        assert (await session.execute(select(WebhookEvent.id))).scalars().all() == [pending]


async def test_stream_events_published_over_30_days_ago_are_pruned_newer_ones_kept(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    account = await create_account(client)
    for _ in range(2):
        await client.post("/v1/orders", json=order_body(), headers=account.headers)
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        await published_events.publish_pending(session)
    async with session_scope(maker) as session:
        old, new = (
            (await session.execute(select(PublishedEvent.id).order_by(PublishedEvent.id)))
            .scalars()
            .all()
        )
        await session.execute(
            update(PublishedEvent)
            .where(PublishedEvent.id == old)
            .values(published_at=utcnow() - timedelta(days=30, minutes=1))
        )
    assert await prune_published_events(maker) == 1
    async with session_scope(maker) as session:
        kept = (await session.execute(select(PublishedEvent.id))).scalars().all()
    assert kept == [new]


async def test_orders_ended_past_the_retention_are_pruned_batch_by_batch(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    account = await create_account(client)
    placed = [(await place_order(client, account))["id"] for _ in range(4)]
    for order_id in placed[:3]:
        cancelled = await client.post(f"/v1/orders/{order_id}/cancel", headers=account.headers)
        assert cancelled.status_code == 200
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        await session.execute(
            update(Order).values(updated_at=utcnow() - timedelta(days=30, minutes=1))
        )
    assert await prune_ended_orders(maker, retention_days=30, batch=2) == 3
    for order_id in placed[:3]:
        gone = await client.get(f"/v1/orders/{order_id}", headers=account.headers)
        assert gone.status_code == 404
    waiting = await client.get(f"/v1/orders/{placed[3]}/events", headers=account.headers)
    assert waiting.status_code == 200 and waiting.json()  # not ended: kept, with its timeline
