"""Every simulator in one app, reached through the adapters the service builds."""

from collections.abc import AsyncIterator

import httpx
import pytest

from app.core.catalogue import Provider
from app.providers.base import VMState
from app.providers.registry import build_adapters, simulated, with_provider_settings
from app.settings import Settings
from app.simulators.control import SimControl


@pytest.fixture
async def http(sim_url: str, sim: SimControl) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=sim_url) as client:
        yield client


def sim_settings(sim_url: str) -> Settings:
    return simulated(Settings(_env_file=None), sim_url)


async def test_each_provider_is_served_under_its_prefix(http: httpx.AsyncClient) -> None:
    for provider in SimControl.providers():
        catalog = await SimControl(http).catalog(provider)
        assert catalog, provider
        assert {"sku", "region", "gpu_model", "gpu_count", "price_per_hour"} <= set(catalog[0])


async def test_only_providers_with_credentials_get_an_adapter(sim_url: str) -> None:
    async with httpx.AsyncClient() as client:
        none = build_adapters(Settings(_env_file=None), client)
        one = build_adapters(
            with_provider_settings(
                Settings(_env_file=None), {"quantacloud": {"api_key": "sim-key"}}
            ),
            client,
        )
    assert none == {}
    assert list(one) == [Provider("quantacloud")]


async def test_stock_put_up_on_each_simulator_becomes_an_offer_and_a_vm(
    http: httpx.AsyncClient, sim_url: str
) -> None:
    wanted = {"verda": "8B300.240V", "hyperstack": "n3-H100x8", "quantacloud": "b300-sxm-x8"}
    catalogs = {p: (await http.get(f"/{p}/_sim/catalog")).json() for p in wanted}
    for provider, sku in wanted.items():
        entry = next(e for e in catalogs[provider] if e["sku"] == sku)
        put = await http.put(
            f"/{provider}/_sim/stock", json={"sku": sku, "region": entry["region"], "quantity": 1}
        )
        assert put.status_code == 200
    async with httpx.AsyncClient() as client:
        adapters = build_adapters(sim_settings(sim_url), client)
        assert set(adapters) == set(SimControl.providers())
        for provider, adapter in adapters.items():
            (offer,) = [o for o in await adapter.fetch_offers() if o.sku == wanted[provider]]
            vm = await adapter.create_vm(
                offer, name="ap-test-1", tag="ap-order-test", ssh_public_key=None
            )
            assert vm.state is VMState.PENDING
            assert offer.key not in {o.key for o in await adapter.fetch_offers()}
            creates = (await http.get(f"/{provider}/_sim/creates")).json()
            assert [c["outcome"] for c in creates] == ["created"]
