"""A create the provider refuses without naming what in the request was wrong leaves the order
waiting, says what the provider answered, and the next stock deploys it; a refusal naming a
field of our request fails the order. End to end: REST API in, simulators out, both databases.
"""

from typing import Any

import httpx
import pytest

from app.simulators.control import SimControl
from tests.factories import AccountHandle, create_account
from tests.waiting import eventually
from tests.watcher.orders import HYPER_H100, VERDA_H100, h100, place, reaches

MACHINES = {
    "hyperstack": HYPER_H100,
    "verda": VERDA_H100,
    "quantacloud": ("quantacloud", "h100-sxm-x1", "us-midwest-4"),
}
# Each provider's input-error code (hyperstack.md §1, verda.md §6, quantacloud.md).
INPUT_ERRORS = {
    "hyperstack": "bad_request",
    "verda": "invalid_request",
    "quantacloud": "validation_error",
}
NAMES = {"hyperstack": "Hyperstack", "verda": "Verda", "quantacloud": "QuantaCloud"}
UNEXPLAINED = "Your project has reached its GPU limit in this region"


async def lines(
    client: httpx.AsyncClient, account: AccountHandle, order_id: str, kind: str
) -> list[dict[str, Any]]:
    answer = await client.get(f"/v1/orders/{order_id}/events", headers=account.headers)
    return [e for e in answer.json() if e["kind"] == kind]


@pytest.mark.parametrize("provider", list(MACHINES))
async def test_an_unexplained_refusal_leaves_the_order_waiting_then_the_stock_deploys_it(
    client: httpx.AsyncClient, sim: SimControl, provider: str
) -> None:
    account = await create_account(client, credit="20")
    order_id = await place(client, account, h100(providers=[provider]))
    code = INPUT_ERRORS[provider]
    await sim.fault(provider, "create_refused", status=400, reason=code, message=UNEXPLAINED)
    await sim.stock(*MACHINES[provider], 1)

    (line,) = await eventually(lambda: lines(client, account, order_id, "refused"))
    assert line["message"] == (
        f"{NAMES[provider]} refused the create (400, '{code}', '{UNEXPLAINED}') without saying "
        "what in the request was wrong: keeps waiting; this offer rests 1 s."
    )
    await reaches(client, account, order_id, "running", seconds=10)
    assert [c["outcome"] for c in await sim.creates(provider)] == ["refused", "created"]
    assert await lines(client, account, order_id, "rejected") == []


async def test_a_refusal_naming_a_field_of_our_request_fails_the_order(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    """The control: the same refusal, naming `flavor_name` of our body, is the request's."""
    account = await create_account(client, credit="20")
    order_id = await place(client, account, h100(providers=["hyperstack"]))
    message = "flavor_name n3-H100x1 cannot boot this image"
    await sim.fault("hyperstack", "create_refused", reason="bad_request", message=message)
    await sim.stock(*HYPER_H100, 1)
    await reaches(client, account, order_id, "failed")
    (line,) = await lines(client, account, order_id, "rejected")
    assert "naming flavor_name of the request" in line["message"]
    assert await lines(client, account, order_id, "refused") == []
    assert [c["outcome"] for c in await sim.creates("hyperstack")] == ["refused"]
