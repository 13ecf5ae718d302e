"""Our account at one provider cannot pay: its order waits and says why while an order on
another provider deploys; the admin sees each provider's balance. Against the simulators."""

from typing import Any

import httpx
import pytest

from app.settings import Settings
from app.simulators.control import SimControl
from tests.factories import ADMIN, create_account
from tests.fixtures.settings import live_settings
from tests.waiting import eventually
from tests.watcher.orders import HYPER_H100, VERDA_H100, h100, order, place

# Slow: the watcher runs against the simulators on the real clock.
pytestmark = pytest.mark.slow


@pytest.fixture
def settings(database_url: str, sim_url: str, sim: SimControl) -> Settings:
    """Live mode pointed at the simulators, with balances read often."""
    return live_settings(database_url, sim_url).model_copy(update={"provider_balance_seconds": 0.2})


async def providers_seen(client: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    answer = await client.get("/v1/admin/providers", headers=ADMIN)
    assert answer.status_code == 200, answer.text
    return {p["provider"]: p for p in answer.json()["data"]}


async def test_an_account_short_at_one_provider_waits_while_another_provider_deploys(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    await sim.config("hyperstack", balance="2.00")  # one hour of n3-H100x1 is $2.40672

    async def balance_read() -> bool:
        balance = (await providers_seen(client))["hyperstack"]["balance"]
        return balance is not None and balance["amount"] == "2.00"

    await eventually(balance_read)
    account = await create_account(client, credit="20")
    short = await place(client, account, h100(providers=["hyperstack"]))
    elsewhere = await place(client, account, h100(providers=["verda"]))
    await sim.stock(*HYPER_H100, 1)
    await sim.stock(*VERDA_H100, 1)

    async def deployed_elsewhere() -> bool:
        return (await order(client, account, elsewhere))["status"] in ("deployed", "running")

    await eventually(deployed_elsewhere)

    async def told() -> list[dict[str, Any]]:
        answer = await client.get(f"/v1/orders/{short}/events", headers=account.headers)
        return [e for e in answer.json() if e["kind"] == "provider_funds"]

    (line,) = await eventually(told)
    assert line["message"] == (
        "Hyperstack account balance $2.00 does not cover one hour of 1x H100 ($2.40672); waiting."
    )
    assert (await order(client, account, short))["status"] == "waiting"
    assert await sim.creates("hyperstack") == []
    # Control: once the account is topped up, the same order deploys from the same stock.
    await sim.config("hyperstack", balance="100.00")

    async def deployed() -> bool:
        return (await order(client, account, short))["status"] in ("deployed", "running")

    await eventually(deployed)


async def test_the_admin_sees_every_provider(client: httpx.AsyncClient, sim: SimControl) -> None:
    async def all_read() -> dict[str, dict[str, Any]] | None:
        seen = await providers_seen(client)
        return seen if all(p["balance"] for p in seen.values()) else None

    seen = await eventually(all_read)
    assert set(seen) == {"verda", "hyperstack", "quantacloud"}
    verda = seen["verda"]
    assert (verda["name"], verda["enabled"], verda["creates_last_hour"]) == ("Verda", True, 0)
    assert verda["balance"]["error"] is None and verda["balance"]["amount"] is not None
    account = await create_account(client)
    refused = await client.get("/v1/admin/providers", headers=account.headers)
    assert refused.status_code == 403


async def test_the_admin_sees_what_is_left_of_each_providers_rate_limit(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    """Verda reports what is left (its `RateLimit` header); Hyperstack's is counted here."""
    account = await create_account(client)
    await place(client, account, h100(providers=["verda", "hyperstack"]))

    async def reported() -> dict[str, dict[str, Any]] | None:
        seen = await providers_seen(client)
        left = [seen[p]["rate_limit_remaining"] for p in ("verda", "hyperstack")]
        return seen if all(n is not None for n in left) else None

    seen = await eventually(reported)
    # Verda's tightest bucket a stock read counts in is a path's 60 a minute; Hyperstack's
    # is the 500 a minute per IP. Both have been read, so both have less left.
    assert 0 <= seen["verda"]["rate_limit_remaining"] < 60
    assert 0 <= seen["hyperstack"]["rate_limit_remaining"] < 500
    assert seen["quantacloud"]["rate_limit_remaining"] is None  # no order waits for it
