"""What the account paid for a machine is what its provider billed for it, to the cent, when it
ends past its paid hours: terminated a moment after `paid_until`, or ended by a limit.

End to end: REST API in, watcher, simulators out. The simulators bill on the service's hour
(`hour_seconds`), so each provider's block shrinks with it: Verda's 10 minutes are 3 s here,
QuantaCloud's hour 18 s. The provider's bill is read from `GET /<provider>/_sim/vms`: the hours
it charged the machine (its `charged` over its `price_per_hour`) at the order's price with fees.
"""

import asyncio
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import httpx
import pytest

from app.settings import Settings
from app.simulators.control import SimControl
from tests.factories import AccountHandle, create_account
from tests.watcher.orders import VERDA_H100, h100, order, place, reaches, timeline

QUANTA_H100 = ("quantacloud", "h100-sxm-x1", "us-midwest-4")
MACHINES = {"verda": VERDA_H100, "quantacloud": QUANTA_H100}
HOUR = 18.0  # seconds in a billed hour, here and at the simulators
CENT = Decimal("0.01")


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Billing hours of 18 s; running VMs read every 0.2 s."""
    return settings.model_copy(update={"billing_hour_seconds": HOUR, "running_check_seconds": 0.2})


async def running(
    client: httpx.AsyncClient, sim: SimControl, provider: str, **wants: Any
) -> tuple[AccountHandle, str, dict[str, Any]]:
    """A machine of `provider` running for an account with $50, its first hour paid."""
    await sim.config(provider, hour_seconds=HOUR)
    handle = await create_account(client, credit="50")
    order_id = await place(client, handle, h100(providers=[provider], **wants))
    await sim.stock(*MACHINES[provider], 1)
    shown = await reaches(client, handle, order_id, "running", seconds=15)
    return handle, order_id, shown


async def billed_by_the_provider(sim: SimControl, provider: str, shown: dict[str, Any]) -> Decimal:
    """The hours the provider billed the order's machine, at the order's price with fees."""
    deployment = shown["deployment"]
    (vm,) = [v for v in await sim.vms(provider) if v["id"] == deployment["provider_vm_id"]]
    hours = Decimal(vm["charged"]) / Decimal(vm["price_per_hour"])
    price = Decimal(deployment["price_per_hour_with_fees"])
    return (price * hours).quantize(CENT, rounding=ROUND_HALF_UP)


@pytest.mark.parametrize("provider", ["verda", "quantacloud"])
@pytest.mark.parametrize("late", [0.3, 1.5])
async def test_a_terminate_just_past_the_paid_hour_pays_the_block_the_provider_bills(
    client: httpx.AsyncClient, sim: SimControl, provider: str, late: float
) -> None:
    handle, order_id, shown = await running(client, sim, provider)
    paid_until = datetime.fromisoformat(shown["paid_until"])
    # The stimulus is sent at a moment of the billing clock; nothing is awaited by sleeping.
    await asyncio.sleep((paid_until - datetime.now(UTC)).total_seconds() + late)
    answer = await client.post(f"/v1/orders/{order_id}/terminate", headers=handle.headers)
    assert answer.status_code == 202, answer.text
    ended = await reaches(client, handle, order_id, "terminated", seconds=15)
    billed = await billed_by_the_provider(sim, provider, ended)
    price = Decimal(ended["deployment"]["price_per_hour_with_fees"])
    assert billed > price  # the control: the provider did bill past the first hour
    assert Decimal(ended["charged_usd"]) == billed


@pytest.mark.parametrize("provider", ["verda", "quantacloud"])
async def test_a_delete_refused_until_past_the_paid_hour_pays_the_block_begun(
    client: httpx.AsyncClient, sim: SimControl, provider: str
) -> None:
    # Once a terminate starts no hour is paid, so the block the provider bills past the paid
    # hour was nobody's: now settling the machine debits it.
    handle, order_id, shown = await running(client, sim, provider)
    paid_until = datetime.fromisoformat(shown["paid_until"])
    await sim.fault(provider, "delete_refused")  # the next delete goes a second later
    await asyncio.sleep((paid_until - datetime.now(UTC)).total_seconds() - 0.5)
    answer = await client.post(f"/v1/orders/{order_id}/terminate", headers=handle.headers)
    assert answer.status_code == 202, answer.text
    ended = await reaches(client, handle, order_id, "terminated", seconds=15)
    billed = await billed_by_the_provider(sim, provider, ended)
    price = Decimal(ended["deployment"]["price_per_hour_with_fees"])
    assert billed > price  # the control: the delete landed past the first hour
    assert Decimal(ended["charged_usd"]) == billed
    (end,) = [e for e in await timeline(client, handle, order_id) if e["kind"] == "terminated"]
    assert "ran past its paid hours" in end["message"]  # and the timeline says so


@pytest.mark.parametrize("provider", ["verda", "quantacloud"])
async def test_a_runtime_limit_ends_the_machine_before_the_provider_bills_more(
    client: httpx.AsyncClient, sim: SimControl, provider: str
) -> None:
    handle, order_id, _ = await running(client, sim, provider, max_runtime_hours=1)
    ended = await reaches(client, handle, order_id, "terminated", seconds=HOUR + 15)
    assert ended["terminate_reason"] == "max_runtime"
    billed = await billed_by_the_provider(sim, provider, ended)
    price = Decimal(ended["deployment"]["price_per_hour_with_fees"])
    assert Decimal(ended["charged_usd"]) == billed == price  # one hour, on both sides
    assert (await order(client, handle, order_id))["charged_usd"] == ended["charged_usd"]
