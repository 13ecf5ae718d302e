"""Webhook endpoints through the REST API, what their receiver got and the deliveries the
service recorded, for the webhook tests."""

from typing import Any

import httpx

from tests.factories import AccountHandle
from tests.waiting import eventually
from tests.watcher.orders import h100, place
from tests.webhooks.receiver import Receiver


async def add_endpoint(
    client: httpx.AsyncClient, account: AccountHandle, url: str, **extra: Any
) -> dict[str, Any]:
    response = await client.post(
        "/v1/webhook-endpoints", json={"url": url, **extra}, headers=account.headers
    )
    assert response.status_code == 201, response.text
    endpoint: dict[str, Any] = response.json()
    return endpoint


async def arrived(receiver: Receiver, path: str, count: int, seconds: float = 5) -> list[Any]:
    async def check() -> list[Any] | None:
        got = receiver.on(path)
        return got if len(got) >= count else None

    return await eventually(check, seconds)


async def deliveries(
    client: httpx.AsyncClient, account: AccountHandle, endpoint_id: str
) -> list[dict[str, Any]]:
    answer = await client.get(
        f"/v1/webhook-endpoints/{endpoint_id}/deliveries", headers=account.headers
    )
    assert answer.status_code == 200, answer.text
    data: list[dict[str, Any]] = answer.json()["data"]
    return data


async def cancelled_order(client: httpx.AsyncClient, account: AccountHandle) -> str:
    """Place an order that cannot match and cancel it: one order.cancelled event."""
    order_id = await place(client, account, h100(providers=["quantacloud"]))
    answer = await client.post(f"/v1/orders/{order_id}/cancel", headers=account.headers)
    assert answer.status_code == 200, answer.text
    return order_id
