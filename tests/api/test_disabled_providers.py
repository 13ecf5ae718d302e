"""Providers this service has no credentials for: the catalogue says so, an order that accepts
only those is refused, one that accepts some of them is placed and says which."""

from collections.abc import AsyncIterator

import httpx
import pytest

from app.main import create_app
from app.settings import Settings
from tests.factories import create_account, order_body
from tests.waiting import started


def only(settings: Settings, *names: str) -> Settings:
    """Live `settings` with credentials for the named providers only (the others unconfigured)."""
    providers = {
        name: value if name in names else type(value)()
        for name, value in settings.providers.items()
    }
    return settings.model_copy(update={"providers": providers, "mode": "live"})


@pytest.fixture
async def verda_only(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a service with credentials for Verda alone."""
    application = create_app(only(settings, "verda"))
    async with started(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            yield c


async def test_the_catalogue_says_which_providers_can_deploy(
    verda_only: httpx.AsyncClient,
) -> None:
    providers = (await verda_only.get("/v1/catalogue")).json()["providers"]
    assert {p["id"]: p["enabled"] for p in providers} == {
        "verda": True,
        "hyperstack": False,
        "quantacloud": False,
    }


async def test_an_order_for_disabled_providers_only_is_refused_naming_them(
    verda_only: httpx.AsyncClient,
) -> None:
    account = await create_account(verda_only)
    refused = await verda_only.post(
        "/v1/orders",
        json=order_body(providers=["hyperstack", "quantacloud"]),
        headers=account.headers,
    )
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["code"] == "providers_not_enabled"
    assert "Hyperstack and QuantaCloud" in error["message"]
    assert error["details"] == {"disabled_providers": ["hyperstack", "quantacloud"]}
    listed = await verda_only.get("/v1/orders", headers=account.headers)
    assert listed.json()["data"] == []
    # Control: the same order with an enabled provider among its choices is placed.
    placed = await verda_only.post(
        "/v1/orders",
        json=order_body(providers=["hyperstack", "verda"]),
        headers=account.headers,
    )
    assert placed.status_code == 201, placed.text


async def test_an_order_with_some_disabled_providers_is_placed_and_says_which(
    verda_only: httpx.AsyncClient,
) -> None:
    account = await create_account(verda_only)
    placed = await verda_only.post(
        "/v1/orders", json=order_body(providers=["verda", "hyperstack"]), headers=account.headers
    )
    assert placed.status_code == 201, placed.text
    order = placed.json()
    assert order["providers"] == ["verda", "hyperstack"]
    assert order["disabled_providers"] == ["hyperstack"]
    timeline = (
        await verda_only.get(f"/v1/orders/{order['id']}/events", headers=account.headers)
    ).json()
    assert [e["kind"] for e in timeline] == ["placed", "providers_disabled"]
    assert timeline[1]["message"] == (
        "Hyperstack: not available on this service (no credentials configured); "
        "this order can deploy only on Verda."
    )


async def test_demo_mode_deploys_on_every_simulated_provider_without_credentials(
    settings: Settings,
) -> None:
    # Demo mode ignores credentials: the simulators accept the ones it gives them.
    demo = only(settings).model_copy(update={"mode": "demo"})
    application = create_app(demo)
    async with started(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            providers = (await c.get("/v1/catalogue")).json()["providers"]
            assert all(p["enabled"] for p in providers)
            account = await create_account(c)
            body = order_body(providers=["hyperstack", "quantacloud"])
            placed = await c.post("/v1/orders", json=body, headers=account.headers)
            assert placed.status_code == 201, placed.text
            assert placed.json()["disabled_providers"] == []


async def test_an_order_on_enabled_providers_says_nothing_of_it(
    verda_only: httpx.AsyncClient,
) -> None:
    account = await create_account(verda_only)
    placed = await verda_only.post(
        "/v1/orders", json=order_body(providers=["verda"]), headers=account.headers
    )
    assert placed.json()["disabled_providers"] == []
    timeline = (
        await verda_only.get(f"/v1/orders/{placed.json()['id']}/events", headers=account.headers)
    ).json()
    assert [e["kind"] for e in timeline] == ["placed"]
