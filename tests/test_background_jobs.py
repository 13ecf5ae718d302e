"""Periodic jobs."""

from datetime import timedelta

import httpx
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.background import (
    create_scheduler,
    prune_idempotency_keys,
    prune_published_events,
    prune_webhook_events,
)
from app.core.clock import utcnow
from app.core.states import DeliveryStatus
from app.services import published_events
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import IdempotencyKey, PublishedEvent, WebhookDelivery, WebhookEvent
from tests.factories import create_account, order_body


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


def test_the_scheduler_registers_each_job_once_with_no_overlap(engine: AsyncEngine) -> None:
    scheduler = create_scheduler(create_sessionmaker(engine))
    jobs = {job.id: job for job in scheduler.get_jobs()}
    assert set(jobs) == {
        "prune_idempotency_keys",
        "prune_webhook_events",
        "prune_published_events",
    }
    assert all(job.max_instances == 1 for job in jobs.values())


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
