"""Orders through the REST API for the tests that run the watcher: placed, read, and waited on
until they reach a status."""

from typing import Any

import httpx

from tests.factories import AccountHandle, order_body
from tests.waiting import eventually

VERDA_H100 = ("verda", "1H100.80S.30V", "FIN-01")  # $2.59/h -> $2.82 with 5% + $0.10
# Hyperstack's prices include the public IP every VM gets ($0.00672/h).
HYPER_H100 = ("hyperstack", "n3-H100x1", "CANADA-1")  # $2.40672/h -> $2.63
HYPER_H100_X8 = ("hyperstack", "n3-H100x8", "CANADA-1")  # $19.20672/h -> $20.27


def h100(**overrides: Any) -> dict[str, Any]:
    """An order for 1x H100 on any provider, up to $3.00/h."""
    body = {
        "gpu_model": "H100",
        "gpu_count": 1,
        "providers": ["verda", "hyperstack", "quantacloud"],
        "max_price_per_hour": "3.00",
        **overrides,
    }
    return order_body(**body)


async def place(client: httpx.AsyncClient, account: AccountHandle, body: dict[str, Any]) -> str:
    response = await client.post("/v1/orders", json=body, headers=account.headers)
    assert response.status_code == 201, response.text
    order_id: str = response.json()["id"]
    return order_id


async def order(client: httpx.AsyncClient, account: AccountHandle, order_id: str) -> dict[str, Any]:
    result: dict[str, Any] = (
        await client.get(f"/v1/orders/{order_id}", headers=account.headers)
    ).json()
    return result


async def reaches(
    client: httpx.AsyncClient,
    account: AccountHandle,
    order_id: str,
    status: str,
    seconds: float = 5,
) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        shown = await order(client, account, order_id)
        return shown if shown["status"] == status else None

    return await eventually(check, seconds)


async def events(client: httpx.AsyncClient, account: AccountHandle, order_id: str) -> list[str]:
    answer = await client.get(f"/v1/orders/{order_id}/events", headers=account.headers)
    return [e["kind"] for e in answer.json()]


async def timeline(
    client: httpx.AsyncClient, account: AccountHandle, order_id: str
) -> list[dict[str, Any]]:
    """The order's timeline lines, oldest first."""
    answer = await client.get(f"/v1/orders/{order_id}/events", headers=account.headers)
    return list(answer.json())


async def account_view(client: httpx.AsyncClient, account: AccountHandle) -> dict[str, Any]:
    result: dict[str, Any] = (await client.get("/v1/account", headers=account.headers)).json()
    return result
