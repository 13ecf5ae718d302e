"""`/<provider>/_sim/balance` and the charging behind it, seen through the adapters the service
builds, on a simulator clock the test advances (no sleeping)."""

import time
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from app.core.catalogue import Provider
from app.providers.base import Offer, ProviderAdapter, ProviderOutOfFunds
from app.providers.registry import build_adapters, simulated
from app.settings import Settings
from app.simulators.app import create_simulator_app
from app.simulators.control import SimControl
from app.simulators.core import ProviderSimulator
from tests.clock import FakeClock
from tests.servers import serve_in_thread

MACHINES = {
    "verda": ("1H100.80S.30V", "FIN-01"),
    "hyperstack": ("n3-L40x1", "NORWAY-1"),
    "quantacloud": ("rtx-pro-6000-blackwell-x1", "us-east-1"),
}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, dict[str, ProviderSimulator]]]:
    app = create_simulator_app()
    with serve_in_thread(app) as url:
        yield url, app.state.simulators


@pytest.fixture
def clock(served: tuple[str, dict[str, ProviderSimulator]]) -> Iterator[FakeClock]:
    """One manual clock for every simulator, for this test only."""
    _, simulators = served
    clock = FakeClock(10_000.0)
    for sim in simulators.values():
        sim.clock = clock
    yield clock
    for sim in simulators.values():
        sim.clock = time.monotonic


@pytest.fixture
async def control(served: tuple[str, dict[str, ProviderSimulator]]) -> AsyncIterator[SimControl]:
    url, _ = served
    async with SimControl(base_url=url) as sims:
        await sims.reset_all(boot_seconds=0)
        yield sims


@pytest.fixture
async def adapters(
    served: tuple[str, dict[str, ProviderSimulator]],
) -> AsyncIterator[dict[Provider, ProviderAdapter]]:
    url, _ = served
    async with httpx.AsyncClient() as client:
        yield build_adapters(simulated(Settings(_env_file=None), url), client)


async def hourly_charge(control: SimControl, provider: str) -> Decimal:
    shown = (await control.client.get(f"/{provider}/_sim/balance")).raise_for_status().json()
    return Decimal(shown["hourly_charge"])


async def offer_of(control: SimControl, adapter: ProviderAdapter, provider: str) -> Offer:
    sku, region = MACHINES[provider]
    await control.stock(provider, sku, region, 2)
    return next(o for o in await adapter.fetch_offers() if (o.sku, o.region) == (sku, region))


async def test_a_balance_set_through_control_is_what_each_adapter_reads(
    control: SimControl, adapters: dict[Provider, ProviderAdapter]
) -> None:
    assert set(adapters) == set(SimControl.providers())
    for provider, adapter in adapters.items():
        assert await control.balance(provider, "123.45") == Decimal("123.45")
        assert await control.get_balance(provider) == Decimal("123.45")
        assert await adapter.balance() == Decimal("123.45"), provider
        assert await control.balance(provider, 80) == Decimal(80)
        assert await adapter.balance() == Decimal(80), provider


async def test_a_running_vm_costs_its_price_per_hour_until_it_is_deleted(
    control: SimControl, adapters: dict[Provider, ProviderAdapter], clock: FakeClock
) -> None:
    for provider, adapter in adapters.items():
        offer = await offer_of(control, adapter, provider)
        assert await hourly_charge(control, provider) == 0
        vm = await adapter.create_vm(
            offer, name=f"ap-{provider}-1", tag="ap-order-b", ssh_public_key=None
        )
        clock.now += 7200  # two hours: whole blocks at every provider
        expected = Decimal("10000.00") - 2 * offer.price_per_hour
        assert await adapter.balance() == expected, provider
        assert await hourly_charge(control, provider) == offer.price_per_hour
        await adapter.delete_vm(vm.id)
        clock.now += 3600
        assert await adapter.balance() == expected, provider
        assert await hourly_charge(control, provider) == 0
        assert await control.get_balance(provider) == expected


async def test_a_create_the_charged_balance_cannot_cover_for_an_hour_is_out_of_funds(
    control: SimControl, adapters: dict[Provider, ProviderAdapter], clock: FakeClock
) -> None:
    for provider, adapter in adapters.items():
        offer = await offer_of(control, adapter, provider)
        await control.balance(provider, offer.price_per_hour * Decimal("1.5"))
        await adapter.create_vm(
            offer, name=f"ap-{provider}-1", tag="ap-order-c", ssh_public_key=None
        )
        clock.now += 3600
        with pytest.raises(ProviderOutOfFunds):
            await adapter.create_vm(
                offer, name=f"ap-{provider}-2", tag="ap-order-c", ssh_public_key=None
            )
        outcomes = [c["outcome"] for c in await control.creates(provider)]
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
async def test_anything_but_a_decimal_is_a_422(control: SimControl, body: Any) -> None:
    for provider in SimControl.providers():
        path = f"/{provider}/_sim/balance"
        refused = await control.client.put(path, json=body)
        assert refused.status_code == 422
        assert "decimal" in refused.json()["error"] or "object" in refused.json()["error"]
        assert await control.get_balance(provider) == Decimal("10000.00")
        config = await control.client.put(f"/{provider}/_sim/config", json={"balance": "x1"})
        assert config.status_code == 422


async def test_a_body_that_is_not_a_json_object_is_a_422(control: SimControl) -> None:
    for body, problem in ((b"twelve", "body must be JSON"), (b"12.5", "a JSON object")):
        refused = await control.client.put("/verda/_sim/balance", content=body)
        assert refused.status_code == 422
        assert problem in refused.json()["error"]
