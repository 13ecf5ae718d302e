"""Dry run against the simulators: stock is read and matched, each order is told what it would
have deployed (once per appearance of the offer), and no create, hold or deploy happens."""

from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY

from app.settings import Settings
from app.simulators.control import SimControl
from tests.factories import AccountHandle, create_account
from tests.fixtures.settings import live_settings
from tests.waiting import eventually, polled
from tests.watcher.orders import HYPER_H100, h100, place

# Slow: the watcher runs against the simulators on the real clock.
pytestmark = pytest.mark.slow


@pytest.fixture
def dry_run() -> bool:
    """In dry run unless a test says otherwise (its control)."""
    return True


@pytest.fixture
def settings(database_url: str, sim_url: str, sim: SimControl, dry_run: bool) -> Settings:
    """Live mode pointed at the simulators, in dry run."""
    return live_settings(database_url, sim_url).model_copy(update={"dry_run": dry_run})


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def would_deploy(
    client: httpx.AsyncClient, account: AccountHandle, order_id: str
) -> list[dict[str, Any]]:
    answer = await client.get(f"/v1/orders/{order_id}/events", headers=account.headers)
    return [e for e in answer.json() if e["kind"] == "would_deploy"]


async def test_stock_for_a_waiting_order_is_told_not_bought(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    account = await create_account(client, credit="10")
    order_id = await place(client, account, h100(providers=["hyperstack"]))
    counted = metric("autoprovision_would_deploy_total", provider="hyperstack")
    await sim.stock(*HYPER_H100, 1)

    async def told() -> list[dict[str, Any]]:
        return await would_deploy(client, account, order_id)

    (line,) = await eventually(told)
    assert line["message"] == (
        "Would have deployed now: Hyperstack CANADA-1 1x H100 (n3-H100x1) at $2.63/h incl. "
        "fees. Dry run: no create sent, nothing held; still waiting."
    )
    await polled("hyperstack", 3)  # more reads of the same appearance: told once only
    assert len(await would_deploy(client, account, order_id)) == 1
    assert await sim.creates("hyperstack") == []
    shown = (await client.get(f"/v1/orders/{order_id}", headers=account.headers)).json()
    assert (shown["status"], shown["deployment"]) == ("waiting", None)
    balance = (await client.get("/v1/account", headers=account.headers)).json()
    assert (balance["balance"], balance["held"]) == ("10.00", "0.00")

    # The stock goes, then comes back: a new appearance is told again.
    await sim.stock(*HYPER_H100, 0)

    async def gone() -> bool:
        offers = await client.get("/v1/offers?gpu_model=h100", headers=account.headers)
        return bool(offers.json()["data"] == [])

    await eventually(gone)
    await sim.stock(*HYPER_H100, 1)

    async def told_twice() -> bool:
        return len(await would_deploy(client, account, order_id)) == 2

    await eventually(told_twice)
    assert metric("autoprovision_would_deploy_total", provider="hyperstack") == counted + 2
    assert await sim.creates("hyperstack") == []


@pytest.mark.parametrize("dry_run", [False])
async def test_control_the_same_stock_without_dry_run_is_bought(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    account = await create_account(client, credit="10")
    order_id = await place(client, account, h100(providers=["hyperstack"]))
    await sim.stock(*HYPER_H100, 1)

    async def created() -> bool:
        return len(await sim.creates("hyperstack")) == 1

    await eventually(created)
    assert await would_deploy(client, account, order_id) == []
    assert (await client.get("/readyz")).json()["dry_run"] is False


async def test_the_service_says_it_is_in_dry_run(client: httpx.AsyncClient) -> None:
    assert (await client.get("/readyz")).json() == {"status": "ready", "dry_run": True}
    assert (await client.get("/v1/catalogue")).json()["dry_run"] is True
