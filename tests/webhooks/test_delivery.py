"""Webhooks end to end: an order deploys at the simulator, a receiver verifies what arrives."""

from datetime import datetime
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.factories import AccountHandle, create_account
from tests.waiting import eventually
from tests.watcher.conftest import Sim
from tests.watcher.test_watcher import HYPER_H100, h100, place, reaches
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


async def order_event_times(
    client: httpx.AsyncClient, account: AccountHandle, order_id: str
) -> dict[str, datetime]:
    answer = await client.get(f"/v1/orders/{order_id}/events", headers=account.headers)
    return {e["kind"]: datetime.fromisoformat(e["created_at"]) for e in answer.json()}


async def deliveries(
    client: httpx.AsyncClient, account: AccountHandle, endpoint_id: str
) -> list[dict[str, Any]]:
    answer = await client.get(
        f"/v1/webhook-endpoints/{endpoint_id}/deliveries", headers=account.headers
    )
    assert answer.status_code == 200, answer.text
    data: list[dict[str, Any]] = answer.json()["data"]
    return data


class TestOrderEvents:
    async def test_deployed_then_running_arrive_verified_within_a_second(
        self, client: httpx.AsyncClient, sim: Sim, receiver: Receiver
    ) -> None:
        account = await create_account(client, credit="10")
        endpoint = await add_endpoint(client, account, f"{receiver.url}/hook")
        order_id = await place(client, account, h100(providers=["hyperstack"]))
        await sim.stock(*HYPER_H100, 1)
        await reaches(client, account, order_id, "running")
        first, second = await arrived(receiver, "/hook", 2)

        deployed, running = first.verify(endpoint["secret"]), second.verify(endpoint["secret"])
        assert (deployed["type"], running["type"]) == ("order.deployed", "order.running")
        assert deployed["data"]["id"] == running["data"]["id"] == order_id
        assert deployed["data"]["status"] == "deployed"
        assert deployed["data"]["deployment"]["provider"] == "hyperstack"
        assert deployed["data"]["deployment"]["region"] == "CANADA-1"
        assert deployed["data"]["deployment"]["price_per_hour_with_fees"] == "2.62"
        assert deployed["data"]["deployment"]["provider_vm_id"]
        assert running["data"]["status"] == "running"
        assert running["data"]["deployment"]["ip"]
        assert first.headers["webhook-id"] != second.headers["webhook-id"]
        assert first.headers["content-type"] == "application/json"

        changed = await order_event_times(client, account, order_id)
        assert first.at - changed["deployed"].timestamp() < 1.0
        assert second.at - changed["running"].timestamp() < 1.0

    async def test_the_body_sent_is_the_body_signed_byte_for_byte(
        self, client: httpx.AsyncClient, receiver: Receiver
    ) -> None:
        account = await create_account(client, credit="10")
        endpoint = await add_endpoint(client, account, f"{receiver.url}/hook")
        order_id = await place(client, account, h100(name="café ✓"))
        await client.post(f"/v1/orders/{order_id}/cancel", headers=account.headers)
        (request,) = await arrived(receiver, "/hook", 1)
        payload = request.verify(endpoint["secret"])
        assert payload["type"] == "order.cancelled"
        assert payload["data"]["name"] == "café ✓"
        tampered = request.body.replace("café".encode(), b"cafe")
        with pytest.raises(WebhookVerificationError):
            Webhook(endpoint["secret"]).verify(tampered, request.headers)
