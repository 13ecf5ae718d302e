"""Helpers that create things through the public API, as a client would."""

from decimal import Decimal
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import create_sessionmaker, session_scope
from app.models import Order, OrderStatus
from tests.conftest import ADMIN_KEY

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


class AccountHandle:
    """An account created through the API: its id and ready-made auth headers."""

    def __init__(self, account_id: str, api_key: str) -> None:
        self.id = account_id
        self.api_key = api_key
        self.headers = {"Authorization": f"Bearer {api_key}"}


async def create_account(
    client: httpx.AsyncClient, name: str = "Ada", credit: Decimal | str | None = None
) -> AccountHandle:
    """A new account, optionally topped up."""
    response = await client.post("/v1/accounts", json={"name": name}, headers=ADMIN)
    assert response.status_code == 201, response.text
    body = response.json()
    account = AccountHandle(body["id"], body["api_key"])
    if credit is not None:
        topped = await client.post(
            f"/v1/accounts/{account.id}/credits", json={"amount": str(credit)}, headers=ADMIN
        )
        assert topped.status_code == 201, topped.text
    return account


def order_body(**overrides: Any) -> dict[str, Any]:
    """A valid order request for 8x B300, with fields replaced by `overrides`."""
    body: dict[str, Any] = {
        "gpu_model": "B300",
        "gpu_count": 8,
        "providers": ["verda", "hyperstack"],
        "max_price_per_hour": "45.00",
    }
    body.update(overrides)
    return body


async def place_order(
    client: httpx.AsyncClient, account: AccountHandle, **overrides: Any
) -> dict[str, Any]:
    """Place an order and return its JSON."""
    response = await client.post(
        "/v1/orders", json=order_body(**overrides), headers=account.headers
    )
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


async def force_order_status(engine: AsyncEngine, order_id: str, status: OrderStatus) -> None:
    """Move an order to `status` behind the API's back (for states the API cannot reach yet)."""
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await session.get(Order, order_id)
        assert order is not None
        order.status = status
