"""`/<provider>/_sim/balance` and the charging behind it, seen through the adapters the service
builds, on a simulator clock the test advances (no sleeping)."""

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from app.core.catalogue import Provider
from app.core.market import DEFAULT_DISK_GB
from app.providers.base import Offer, ProviderAdapter, ProviderOutOfFunds
from app.providers.registry import build_adapters, simulated
from app.settings import Settings
from app.simulators.control import SimControl
from tests.clock import FakeClock

MACHINES = {
    "verda": ("1H100.80S.30V", "FIN-01"),
    "hyperstack": ("n3-L40x1", "NORWAY-1"),
    "quantacloud": ("rtx-pro-6000-blackwell-x1", "us-east-1"),
}


@pytest.fixture
def sim_boot_seconds() -> float:
    """VMs run as soon as they are made."""
    return 0.0


@pytest.fixture
async def adapters(sim_url: str) -> AsyncIterator[dict[Provider, ProviderAdapter]]:
    async with httpx.AsyncClient() as client:
        yield build_adapters(simulated(Settings(_env_file=None), sim_url), client)


async def hourly_charge(sim: SimControl, provider: str) -> Decimal:
    shown = (await sim.client.get(f"/{provider}/_sim/balance")).raise_for_status().json()
    return Decimal(shown["hourly_charge"])


MICRO = Decimal("0.000001")


async def offer_of(sim: SimControl, adapter: ProviderAdapter, provider: str) -> Offer:
    sku, region = MACHINES[provider]
    await sim.stock(provider, sku, region, 2)
    return next(o for o in await adapter.fetch_offers() if (o.sku, o.region) == (sku, region))


async def test_a_balance_set_through_control_is_what_each_adapter_reads(
    sim: SimControl, adapters: dict[Provider, ProviderAdapter]
) -> None:
    assert set(adapters) == set(SimControl.providers())
    for provider, adapter in adapters.items():
        assert await sim.balance(provider, "123.45") == Decimal("123.45")
        assert await sim.get_balance(provider) == Decimal("123.45")
        assert await adapter.balance() == Decimal("123.45"), provider
        assert await sim.balance(provider, 80) == Decimal(80)
        assert await adapter.balance() == Decimal(80), provider


async def test_a_running_vm_costs_its_price_per_hour_until_it_is_deleted(
    sim: SimControl, adapters: dict[Provider, ProviderAdapter], sim_clock: FakeClock
) -> None:
    for provider, adapter in adapters.items():
        offer = await offer_of(sim, adapter, provider)
        assert await hourly_charge(sim, provider) == 0
        vm = await adapter.create_vm(
            offer, name=f"ap-{provider}-1", tag="ap-order-b", ssh_public_key=None
        )
        sim_clock.advance(7200)  # two hours: whole blocks at every provider
        # Verda bills the OS volume apart (the default size), by the GB-second.
        disk = DEFAULT_DISK_GB * offer.disk_price_per_gb_hour
        expected = Decimal("10000.00") - 2 * offer.price_per_hour - (2 * disk).quantize(MICRO)
        assert await adapter.balance() == expected, provider
        assert await hourly_charge(sim, provider) == offer.price_per_hour + disk
        await adapter.delete_vm(vm.id)
        sim_clock.advance(3600)
        assert await adapter.balance() == expected, provider
        assert await hourly_charge(sim, provider) == 0
        assert await sim.get_balance(provider) == expected


async def test_a_create_the_charged_balance_cannot_cover_for_an_hour_is_out_of_funds(
    sim: SimControl, adapters: dict[Provider, ProviderAdapter], sim_clock: FakeClock
) -> None:
    for provider, adapter in adapters.items():
        offer = await offer_of(sim, adapter, provider)
        await sim.balance(provider, offer.price_per_hour * Decimal("1.5"))
        await adapter.create_vm(
            offer, name=f"ap-{provider}-1", tag="ap-order-c", ssh_public_key=None
        )
        sim_clock.advance(3600)
        with pytest.raises(ProviderOutOfFunds):
            await adapter.create_vm(
                offer, name=f"ap-{provider}-2", tag="ap-order-c", ssh_public_key=None
            )
        outcomes = [c["outcome"] for c in await sim.creates(provider)]
        assert outcomes == ["created", "insufficient_funds"], provider


@pytest.mark.parametrize(
    "body",
    [
        {"balance": "abc"},
        {"balance": True},
        {"balance": None},
        {"balance": [1]},
        {"balance": "NaN"},
        {"balance": ""},
        {},
        [1, 2],
    ],
)
async def test_anything_but_a_decimal_is_a_422(sim: SimControl, body: Any) -> None:
    for provider in SimControl.providers():
        path = f"/{provider}/_sim/balance"
        refused = await sim.client.put(path, json=body)
        assert refused.status_code == 422
        assert "decimal" in refused.json()["error"] or "object" in refused.json()["error"]
        assert await sim.get_balance(provider) == Decimal("10000.00")
        config = await sim.client.put(f"/{provider}/_sim/config", json={"balance": "x1"})
        assert config.status_code == 422


async def test_a_body_that_is_not_a_json_object_is_a_422(sim: SimControl) -> None:
    for body, problem in ((b"twelve", "body must be JSON"), (b"12.5", "a JSON object")):
        refused = await sim.client.put("/verda/_sim/balance", content=body)
        assert refused.status_code == 422
        assert problem in refused.json()["error"]
