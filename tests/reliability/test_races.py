"""Many orders, little stock, little money: one VM per order, oldest first, never overdrawn."""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.providers.registry import build_adapters
from app.settings import Settings
from app.simulators.control import SimControl
from app.storage.db import create_read_sessionmaker, create_sessionmaker, session_scope
from app.storage.models import Account, Attempt
from app.watcher.watcher import Watcher
from tests.factories import ADMIN, AccountHandle, create_account, order_body
from tests.waiting import eventually, polled

HYPER_H100_X8 = ("hyperstack", "n3-H100x8", "CANADA-1")  # $19.20672/h -> $20.27 with fees


def h100x8(**overrides: Any) -> dict[str, Any]:
    return order_body(gpu_model="H100", gpu_count=8, providers=["hyperstack"], **overrides)


async def place_all(client: httpx.AsyncClient, account: AccountHandle, count: int) -> list[str]:
    """Orders placed one after another, so their age order is their list order."""
    ids = []
    for _ in range(count):
        response = await client.post("/v1/orders", json=h100x8(), headers=account.headers)
        ids.append(response.json()["id"])
    return ids


async def statuses(client: httpx.AsyncClient, account: AccountHandle) -> dict[str, str]:
    listed = (await client.get("/v1/orders?limit=100", headers=account.headers)).json()
    return {o["id"]: o["status"] for o in listed["data"]}


async def vms_per_order(sim: SimControl) -> dict[str, int]:
    counts: dict[str, int] = {}
    for vm in await sim.vms("hyperstack"):
        token = vm["name"].split("-")[1]
        counts[f"ord_{token}"] = counts.get(f"ord_{token}", 0) + 1
    return counts


async def test_one_unit_twenty_orders_the_oldest_wins_then_the_next_three(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    account = await create_account(client, credit="1000")
    ids = await place_all(client, account, 20)
    await sim.stock(*HYPER_H100_X8, 1)

    async def one_deployed() -> bool:
        return list((await statuses(client, account)).values()).count("waiting") == 19

    await eventually(one_deployed)
    await polled("hyperstack")  # more polls: still only one
    shown = await statuses(client, account)
    assert shown[ids[0]] != "waiting"
    assert [i for i in ids if shown[i] != "waiting"] == [ids[0]]
    assert await vms_per_order(sim) == {ids[0]: 1}

    await sim.stock(*HYPER_H100_X8, 3)

    async def four_deployed() -> bool:
        return list((await statuses(client, account)).values()).count("waiting") == 16

    await eventually(four_deployed)
    await polled("hyperstack")
    shown = await statuses(client, account)
    assert [i for i in ids if shown[i] != "waiting"] == ids[:4]
    assert await vms_per_order(sim) == dict.fromkeys(ids[:4], 1)


async def test_money_for_one_hour_and_five_orders_at_once_deploys_one(
    client: httpx.AsyncClient, sim: SimControl, engine: AsyncEngine
) -> None:
    account = await create_account(client, credit="20.27")  # exactly one hour of one
    ids = await asyncio.gather(
        *(client.post("/v1/orders", json=h100x8(), headers=account.headers) for _ in range(5))
    )
    await sim.stock(*HYPER_H100_X8, 5)

    async def one_deployed() -> bool:
        return list((await statuses(client, account)).values()).count("waiting") == 4

    await eventually(one_deployed)
    await polled("hyperstack")  # four units left and four orders waiting, but no money
    assert list((await statuses(client, account)).values()).count("waiting") == 4
    assert len(await sim.creates("hyperstack")) == 1
    async with session_scope(create_sessionmaker(engine)) as session:
        stored = await session.get(Account, account.id)
        assert stored is not None
        assert stored.balance >= 0 and stored.balance - stored.held >= 0
    assert len(ids) == 5
    # Control: money for one more hour, and exactly one more deploys.
    credited = await client.post(
        f"/v1/accounts/{account.id}/credits", json={"amount": "20.27"}, headers=ADMIN
    )
    assert credited.status_code < 300, credited.text

    async def two_deployed() -> bool:
        return list((await statuses(client, account)).values()).count("waiting") == 3

    await eventually(two_deployed)
    await polled("hyperstack")
    assert list((await statuses(client, account)).values()).count("waiting") == 3
    assert len(await sim.creates("hyperstack")) == 2


@pytest.fixture
async def second_watcher(
    app: FastAPI, engine: AsyncEngine, settings: Settings
) -> AsyncIterator[Watcher]:
    """A second watcher on the same database, polling at the same time, as if two replicas
    both believed they held the lease."""
    async with httpx.AsyncClient() as http:
        watcher = Watcher(
            settings=settings,
            adapters=build_adapters(settings, http),
            sessionmaker=create_sessionmaker(engine),
            read_sessionmaker=create_read_sessionmaker(engine),
        )
        await watcher.start()
        yield watcher
        await watcher.stop()


async def test_two_watchers_polling_at_once_still_give_each_order_one_vm(
    client: httpx.AsyncClient, sim: SimControl, engine: AsyncEngine, second_watcher: Watcher
) -> None:
    account = await create_account(client, credit="1000")
    ids = await place_all(client, account, 10)
    served = 0
    # Setting stock replaces what is left, so each burst must be used up at the simulator (its
    # VMs made), not merely claimed: a create still in flight would eat a unit of the next burst.
    for burst in (3, 4, 5):
        await sim.stock(*HYPER_H100_X8, burst)
        served = min(len(ids), served + burst)

        async def burst_served(at_least: int = served) -> bool:
            return len(await sim.vms("hyperstack")) >= at_least

        await eventually(burst_served, seconds=10)
    assert await vms_per_order(sim) == dict.fromkeys(ids, 1)
    async with session_scope(create_sessionmaker(engine)) as session:
        attempts = await session.scalar(select(func.count()).select_from(Attempt))
        assert attempts == len(await sim.creates("hyperstack"))
