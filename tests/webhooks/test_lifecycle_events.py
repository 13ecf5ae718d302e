"""The events of a machine's end, as webhooks: terminating and terminated with the reason and
what it cost, lost with what the provider reported, and an account's low balance, each signed
(Standard Webhooks) and sent once."""

from typing import Any

import httpx
import pytest

from app.settings import Settings
from app.simulators.control import SimControl
from tests.factories import ADMIN, create_account
from tests.waiting import eventually
from tests.watcher.orders import HYPER_H100, h100, place, reaches
from tests.webhooks.endpoints import add_endpoint, arrived
from tests.webhooks.receiver import Receiver


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Running VMs read often, so a VM the provider ends is seen at once."""
    return settings.model_copy(update={"running_check_seconds": 0.2})


def types(received: list[Any], secret: str) -> list[tuple[str, dict[str, Any]]]:
    verified = [r.verify(secret) for r in received]
    return [(body["type"], body["data"]) for body in verified]


async def test_terminate_sends_terminating_then_terminated_with_the_reason_and_the_cost(
    client: httpx.AsyncClient, sim: SimControl, receiver: Receiver
) -> None:
    account = await create_account(client, credit="10")
    endpoint = await add_endpoint(
        client, account, f"{receiver.url}/hook", events=["order.terminating", "order.terminated"]
    )
    order_id = await place(client, account, h100(providers=["hyperstack"]))
    await sim.stock(*HYPER_H100, 1)
    await reaches(client, account, order_id, "running")
    answer = await client.post(f"/v1/orders/{order_id}/terminate", headers=account.headers)
    assert answer.status_code == 202
    await reaches(client, account, order_id, "terminated")
    received = await arrived(receiver, "/hook", 2)
    (first, terminating), (second, terminated) = types(received, endpoint["secret"])
    assert (first, second) == ("order.terminating", "order.terminated")
    assert terminating["terminate_reason"] == terminated["terminate_reason"] == "requested"
    assert terminated["status"] == "terminated" and terminated["charged_usd"] == "0.04"
    assert terminated["ended_at"] and terminated["deployment"]["status"] == "terminated"


async def test_a_vm_the_provider_ends_sends_order_lost(
    client: httpx.AsyncClient, sim: SimControl, receiver: Receiver
) -> None:
    account = await create_account(client, credit="10")
    endpoint = await add_endpoint(client, account, f"{receiver.url}/hook", events=["order.lost"])
    order_id = await place(client, account, h100(providers=["hyperstack"]))
    await sim.stock(*HYPER_H100, 1)
    running = await reaches(client, account, order_id, "running")
    await sim.end_vm("hyperstack", running["deployment"]["provider_vm_id"])
    await reaches(client, account, order_id, "lost")
    ((kind, lost),) = types(await arrived(receiver, "/hook", 1), endpoint["secret"])
    assert (kind, lost["id"], lost["status"]) == ("order.lost", order_id, "lost")


async def test_a_runway_below_the_threshold_sends_one_low_balance(
    client: httpx.AsyncClient, sim: SimControl, receiver: Receiver
) -> None:
    # $3.00 pays one hour of $2.63: once it is paid, $0.37 pays 0.14 h, below the 2 h default.
    account = await create_account(client, credit="3.00")
    endpoint = await add_endpoint(
        client, account, f"{receiver.url}/hook", events=["account.low_balance"]
    )
    order_id = await place(client, account, h100(providers=["hyperstack"]))
    await sim.stock(*HYPER_H100, 1)
    await reaches(client, account, order_id, "running")
    ((kind, data),) = types(await arrived(receiver, "/hook", 1), endpoint["secret"])
    assert kind == "account.low_balance"

    async def published() -> list[Any]:  # the same event on the account's event stream
        page = (await client.get("/v1/events", headers=account.headers)).json()
        return [e for e in page["data"] if e["type"] == "account.low_balance"]

    (streamed,) = await eventually(published)
    assert "0.14 h" in streamed["message"]
    assert (data["id"], data["available"], data["hourly_spend"], data["runway_hours"]) == (
        account.id,
        "0.37",
        "2.63",
        "0.14",
    )
    shown = (await client.get("/v1/account", headers=account.headers)).json()
    assert (shown["low_balance"], shown["runway_hours"]) == (True, 0.14)
    # The control for "once": a top-up lifts it above, nothing more is sent for that.
    await client.post(
        f"/v1/accounts/{account.id}/credits",
        json={"amount": "20"},
        headers=ADMIN,
    )
    shown = (await client.get("/v1/account", headers=account.headers)).json()
    assert shown["low_balance"] is False
    assert len(receiver.on("/hook")) == 1
