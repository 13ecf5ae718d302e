"""The caps on one account's orders: past its waiting orders a 409 too_many_orders, past its
placements in an hour a 429 too_many_placements; under them a 201."""

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.clock import utcnow
from app.main import create_app
from app.settings import Settings
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Order
from tests.factories import create_account, order_body, place_order
from tests.waiting import started

CAP = 3
RATE = 4


@pytest.fixture
async def capped(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the service with room for CAP waiting orders per account."""
    application = create_app(settings.model_copy(update={"max_waiting_orders_per_account": CAP}))
    async with started(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            yield c


async def test_past_the_cap_an_order_is_a_409_and_a_cancel_makes_room(
    capped: httpx.AsyncClient,
) -> None:
    ada = await create_account(capped, "Ada")
    placed = [await place_order(capped, ada, name=f"o{n}") for n in range(CAP)]
    refused = await capped.post("/v1/orders", json=order_body(), headers=ada.headers)
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "too_many_orders"
    assert error["details"] == {"max_waiting_orders": CAP}
    bob = await create_account(capped, "Bob")
    await place_order(capped, bob)  # another account's room is its own
    cancelled = await capped.post(f"/v1/orders/{placed[0]['id']}/cancel", headers=ada.headers)
    assert cancelled.status_code == 200
    await place_order(capped, ada)  # room again
    listed = await capped.get("/v1/orders", params={"status": "waiting"}, headers=ada.headers)
    assert len(listed.json()["data"]) == CAP


async def test_placements_at_once_do_not_pass_the_cap(capped: httpx.AsyncClient) -> None:
    ada = await create_account(capped, "Ada")
    answers = await asyncio.gather(
        *(capped.post("/v1/orders", json=order_body(), headers=ada.headers) for _ in range(8))
    )
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [201] * CAP + [409] * (8 - CAP)


@pytest.fixture
async def rated(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the service where an account may place RATE orders an hour (and have all
    8 of the concurrent test's requests served at once: the rate, not the share, answers)."""
    rate = {"max_placements_per_hour": RATE, "max_requests_in_flight_per_client": 8}
    application = create_app(settings.model_copy(update=rate))
    async with started(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            yield c


async def _placed_earlier(engine: AsyncEngine, order_id: str, ago: timedelta) -> None:
    async with session_scope(create_sessionmaker(engine)) as session:
        await session.execute(
            update(Order).where(Order.id == order_id).values(created_at=utcnow() - ago)
        )


async def test_past_the_rate_a_placement_is_a_429_until_the_hour_has_room(
    rated: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    ada = await create_account(rated, "Ada")
    placed = []
    for _ in range(RATE):  # placed and cancelled: a cancel gives back no placement
        placed.append((await place_order(rated, ada))["id"])
        cancelled = await rated.post(f"/v1/orders/{placed[-1]}/cancel", headers=ada.headers)
        assert cancelled.status_code == 200
    refused = await rated.post("/v1/orders", json=order_body(), headers=ada.headers)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "too_many_placements"
    assert error["details"] == {"max_placements_per_hour": RATE}
    assert 3590 <= int(refused.headers["Retry-After"]) <= 3600
    bob = await create_account(rated, "Bob")
    await place_order(rated, bob)  # another account's rate is its own

    await _placed_earlier(engine, placed[0], timedelta(minutes=59, seconds=30))
    later = await rated.post("/v1/orders", json=order_body(), headers=ada.headers)
    assert later.status_code == 429
    assert 1 <= int(later.headers["Retry-After"]) <= 30
    await _placed_earlier(engine, placed[0], timedelta(hours=1, seconds=1))
    await place_order(rated, ada)  # the oldest left the hour: room for one
    again = await rated.post("/v1/orders", json=order_body(), headers=ada.headers)
    assert again.status_code == 429


async def test_placements_at_once_do_not_pass_the_rate(rated: httpx.AsyncClient) -> None:
    ada = await create_account(rated, "Ada")
    answers = await asyncio.gather(
        *(rated.post("/v1/orders", json=order_body(), headers=ada.headers) for _ in range(8))
    )
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [201] * RATE + [429] * (8 - RATE)
