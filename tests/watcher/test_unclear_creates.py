"""Unclear creates at QuantaCloud, whose VMs carry no name: never two orders on one VM.

The attack that found the bug: order A's create makes a VM but answers 500; a moment later
order B matches the same kind of machine and its create makes a VM whose answer is slow. A's
look-up saw B's VM, owned by no one yet, and took it: both orders ran on B's VM, both paid, and
A's own VM ran with no owner.
"""

from datetime import datetime
from decimal import Decimal
from typing import Any

import httpx
import pytest

from app.settings import Settings
from app.simulators.control import SimControl
from tests.factories import AccountHandle, create_account, order_body
from tests.fixtures.settings import live_settings
from tests.waiting import eventually
from tests.watcher.orders import account_view, events, place, reaches

# Slow: the watcher runs against the simulators on the real clock.
pytestmark = pytest.mark.slow

L40S = ("quantacloud", "l40s-x1", "us-east-1")  # $0.99/h -> $1.14 with 5% + $0.10
PRICE = Decimal("1.14")
# A waits this long after its unclear answer before it looks its VM up, and B's answer takes
# longer than that: without one open attempt per kind, A's look-up would see B's VM unowned.
OUTCOME_CHECK = 1.0
B_ANSWER_DELAY = 2.0


@pytest.fixture
def settings(database_url: str, sim_url: str, sim: SimControl) -> Settings:
    """Live mode on the simulators, with a create timeout that outlasts B's slow answer."""
    return live_settings(database_url, sim_url).model_copy(
        update={"outcome_check_seconds": OUTCOME_CHECK, "provider_create_timeout_seconds": 5}
    )


def l40s() -> dict[str, Any]:
    return order_body(
        gpu_model="L40S", gpu_count=1, providers=["quantacloud"], max_price_per_hour="2.00"
    )


async def vm_of(client: httpx.AsyncClient, account: AccountHandle, order_id: str) -> str:
    shown = await reaches(client, account, order_id, "running", seconds=15)
    vm_id: str = shown["deployment"]["provider_vm_id"]
    return vm_id


async def test_an_unclear_create_does_not_take_the_vm_of_a_create_still_in_flight(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    account = await create_account(client, credit="10")
    first = await place(client, account, l40s())
    await sim.fault("quantacloud", "create_error_after_commit")  # A: a VM, and a 500
    await sim.fault("quantacloud", "create_delay", seconds=B_ANSWER_DELAY)  # B: a slow answer
    await sim.stock(*L40S, 2)
    await eventually(lambda: _has(client, account, first, "outcome_unknown"))
    second = await place(client, account, l40s())

    first_vm, second_vm = await vm_of(client, account, first), await vm_of(client, account, second)
    creates = await sim.creates("quantacloud")
    assert [c["outcome"] for c in creates] == ["error_after_commit", "created"]
    assert (first_vm, second_vm) == (creates[0]["vm_id"], creates[1]["vm_id"])
    assert first_vm != second_vm
    assert "adopted" in await events(client, account, first)
    assert "adopted" not in await events(client, account, second)
    balance = await account_view(client, account)
    assert (Decimal(balance["balance"]), balance["held"]) == (10 - 2 * PRICE, "0.00")


async def test_three_unclear_creates_of_one_kind_each_get_their_own_vm(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    account = await create_account(client, credit="10")
    placed = [await place(client, account, l40s()) for _ in range(3)]
    await sim.fault("quantacloud", "create_error_after_commit", count=3)
    await sim.stock(*L40S, 3)

    vms = [await vm_of(client, account, order_id) for order_id in placed]
    creates = await sim.creates("quantacloud")
    assert [c["outcome"] for c in creates] == ["error_after_commit"] * 3
    assert sorted(vms) == sorted(c["vm_id"] for c in creates)  # one each, none shared
    for order_id in placed:
        kinds = await events(client, account, order_id)
        assert kinds.count("create_sent") == 1 and "adopted" in kinds
    balance = await account_view(client, account)
    assert Decimal(balance["balance"]) == 10 - 3 * PRICE


async def test_a_second_order_of_the_kind_waits_only_until_the_first_is_resolved(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    """The price of the rule: B's create goes out once A's VM is found, not before."""
    account = await create_account(client, credit="10")
    first = await place(client, account, l40s())
    second = await place(client, account, l40s())
    await sim.fault("quantacloud", "create_error_after_commit")
    await sim.stock(*L40S, 2)
    await vm_of(client, account, first)
    await vm_of(client, account, second)
    first_events = await _timeline(client, account, first)
    second_events = await _timeline(client, account, second)
    assert second_events["create_sent"] >= first_events["adopted"]


async def _has(client: httpx.AsyncClient, account: AccountHandle, order_id: str, kind: str) -> bool:
    return kind in await events(client, account, order_id)


async def _timeline(
    client: httpx.AsyncClient, account: AccountHandle, order_id: str
) -> dict[str, datetime]:
    """Event kind -> when it was written."""
    answer = await client.get(f"/v1/orders/{order_id}/events", headers=account.headers)
    return {e["kind"]: datetime.fromisoformat(e["created_at"]) for e in answer.json()}
