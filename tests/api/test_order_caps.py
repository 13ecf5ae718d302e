"""The cap on one account's waiting orders: past it 409 too_many_orders, under it a 201."""

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from app.main import create_app
from app.settings import Settings
from tests.factories import create_account, order_body, place_order
from tests.waiting import started

CAP = 3


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
