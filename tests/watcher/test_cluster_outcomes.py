"""A Verda cluster order through every partial outcome of the deploy protocol: a create refused
for capacity, a create whose answer is lost, a cluster that fails after it was accepted, and a
discontinue refused once. Each ends with one cluster per order, one debit per cluster that
ran, and no cluster at Verda that no order owns.

Black box, as tests/watcher/test_clusters.py: REST API in, simulators out, both databases.
"""

from decimal import Decimal
from typing import Any

import httpx
import pytest

from app.settings import Settings
from app.simulators.control import SimControl
from tests.factories import AccountHandle, create_account, order_body
from tests.waiting import eventually
from tests.watcher.orders import account_view, events, order, place, reaches

VERDA_16H200 = ("verda", "16H200", "FIN-01")  # 2 nodes of 8 H200
CREDIT = Decimal("200")
VERDA_16H200_ICE = ("verda", "16H200", "ICE-01")  # the same cluster type, elsewhere
# Far longer than any test here: an offer that answered with a capacity error is not tried
# again while a test looks at the order waiting (a loaded machine can take seconds per step).
COOLDOWN_SECONDS = 120.0


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Real-length billing hours; running machines read every 0.2 s; a capacity error keeps
    the offer cool for COOLDOWN_SECONDS."""
    return settings.model_copy(
        update={
            "billing_hour_seconds": 3600.0,
            "running_check_seconds": 0.2,
            "capacity_cooldown_seconds": COOLDOWN_SECONDS,
        }
    )


def h200() -> dict[str, Any]:
    """An order for 2 nodes of 8 H200 at Verda, up to $70/h for the whole cluster."""
    return order_body(
        gpu_model="H200", gpu_count=8, nodes=2, providers=["verda"], max_price_per_hour="70.00"
    )


async def cluster_creates(sim: SimControl) -> list[dict[str, Any]]:
    return [c for c in await sim.creates("verda") if c["kind"] == "cluster"]


async def ledger(client: httpx.AsyncClient, handle: AccountHandle) -> list[dict[str, Any]]:
    """The account's ledger, oldest first."""
    answer = await client.get("/v1/account/ledger", params={"limit": 100}, headers=handle.headers)
    assert answer.status_code == 200, answer.text
    entries: list[dict[str, Any]] = answer.json()["data"]
    return entries[::-1]


def amounts(entries: list[dict[str, Any]], kind: str) -> list[Decimal]:
    return [Decimal(e["amount"]) for e in entries if e["kind"] == kind]


async def unowned_clusters(
    client: httpx.AsyncClient, handle: AccountHandle, sim: SimControl
) -> list[dict[str, Any]]:
    """Clusters at the simulator neither discontinued nor the machine of one of the account's
    deployed or running orders."""
    listed = (await client.get("/v1/orders", headers=handle.headers)).json()["data"]
    owned = {
        o["deployment"]["provider_vm_id"].removeprefix("cluster:")
        for o in listed
        if o["status"] in ("deployed", "running") and o["deployment"]
    }
    return [
        c
        for c in await sim.clusters("verda")
        if c["status"] != "discontinued" and c["id"] not in owned
    ]


async def kinds_include(
    client: httpx.AsyncClient, handle: AccountHandle, order_id: str, kind: str
) -> list[str] | None:
    kinds = await events(client, handle, order_id)
    return kinds if kind in kinds else None


class TestCreateRefusedForCapacity:
    async def test_the_hold_comes_back_the_order_waits_and_the_next_stock_deploys_it(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit=str(CREDIT))
        order_id = await place(client, handle, h200())
        await sim.fault("verda", "capacity_race")  # someone else took the unit first
        await sim.stock(*VERDA_16H200, 1)
        await eventually(lambda: kinds_include(client, handle, order_id, "no_capacity"))
        await sim.stock(*VERDA_16H200, 0)  # gone, as a capacity race leaves it

        shown = await order(client, handle, order_id)
        assert shown["status"] == "waiting"
        tried = shown["deployment"]  # the attempt, as it ended
        assert (tried["status"], tried["provider_vm_id"]) == ("not_created", None)
        (refused,) = await cluster_creates(sim)
        assert (refused["outcome"], refused["vm_id"]) == ("capacity_race", None)
        assert await sim.clusters("verda") == []
        balance = await account_view(client, handle)
        assert (Decimal(balance["balance"]), Decimal(balance["held"])) == (CREDIT, Decimal(0))
        entries = await ledger(client, handle)
        assert amounts(entries, "hold") == amounts(entries, "hold_release")
        assert amounts(entries, "debit") == []

        await sim.stock(*VERDA_16H200_ICE, 1)  # the next stock (FIN-01's is cooling down)
        running = await reaches(client, handle, order_id, "running", seconds=15)
        creates = await cluster_creates(sim)
        assert [c["outcome"] for c in creates] == ["capacity_race", "created"]
        (cluster,) = await sim.clusters("verda")
        assert running["deployment"]["provider_vm_id"] == f"cluster:{creates[1]['vm_id']}"
        assert cluster["id"] == creates[1]["vm_id"]
        price = Decimal(running["deployment"]["price_per_hour_with_fees"])
        assert amounts(await ledger(client, handle), "debit") == [price]
        balance = await account_view(client, handle)
        assert (Decimal(balance["balance"]), Decimal(balance["held"])) == (
            CREDIT - price,
            Decimal(0),
        )
        assert await unowned_clusters(client, handle, sim) == []


class TestUnclearCreate:
    async def test_the_cluster_the_create_made_is_adopted_by_its_hostname_and_paid_once(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit=str(CREDIT))
        order_id = await place(client, handle, h200())
        await sim.fault("verda", "create_error_after_commit")  # made, and the answer is a 500
        await sim.stock(*VERDA_16H200, 2)  # room for a (wrong) second cluster
        running = await reaches(client, handle, order_id, "running", seconds=15)

        (create,) = await cluster_creates(sim)
        assert create["outcome"] == "error_after_commit"
        assert create["name"] == f"ap-{order_id.removeprefix('ord_')}-1"
        (cluster,) = await sim.clusters("verda")
        assert (cluster["id"], cluster["name"]) == (create["vm_id"], create["name"])
        assert running["deployment"]["provider_vm_id"] == f"cluster:{cluster['id']}"
        kinds = await events(client, handle, order_id)
        assert kinds.count("create_sent") == 1
        assert "outcome_unknown" in kinds and "adopted" in kinds
        # Positive control for "no second create": a second cluster was still in stock.
        catalog = await sim.catalog("verda")
        (kind,) = [k for k in catalog if (k["sku"], k["region"]) == VERDA_16H200[1:]]
        assert kind["stock"] == 1
        price = Decimal(running["deployment"]["price_per_hour_with_fees"])
        entries = await ledger(client, handle)
        assert amounts(entries, "debit") == [price]
        balance = await account_view(client, handle)
        assert (Decimal(balance["balance"]), Decimal(balance["held"])) == (
            CREDIT - price,
            Decimal(0),
        )
        assert await unowned_clusters(client, handle, sim) == []


class TestClusterFailsAfterAccept:
    async def test_the_failed_cluster_is_discontinued_refunded_and_a_second_one_runs(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit=str(CREDIT))
        order_id = await place(client, handle, h200())
        await sim.fault("verda", "fail_after_accept")  # accepted, then `error` while made
        await sim.stock(*VERDA_16H200, 1)
        await eventually(lambda: kinds_include(client, handle, order_id, "vm_failed"), seconds=10)
        await reaches(client, handle, order_id, "waiting", seconds=10)

        (first,) = await cluster_creates(sim)
        assert first["outcome"] == "created"

        async def failed_one_ended() -> list[dict[str, Any]] | None:
            listed = await sim.clusters("verda")
            return listed if [c["status"] for c in listed] == ["discontinued"] else None

        (failed,) = await eventually(failed_one_ended, seconds=10)
        assert failed["id"] == first["vm_id"]
        entries = await ledger(client, handle)
        (paid,) = amounts(entries, "debit")
        assert amounts(entries, "refund") == [paid]  # its first hour, back whole
        balance = await account_view(client, handle)
        assert (Decimal(balance["balance"]), Decimal(balance["held"])) == (CREDIT, Decimal(0))

        await sim.stock(*VERDA_16H200, 1)  # the next stock
        running = await reaches(client, handle, order_id, "running", seconds=15)
        creates = await cluster_creates(sim)
        assert [c["outcome"] for c in creates] == ["created", "created"]
        second = creates[1]["vm_id"]
        assert second != failed["id"]
        assert running["deployment"]["provider_vm_id"] == f"cluster:{second}"
        statuses = {c["id"]: c["status"] for c in await sim.clusters("verda")}
        assert statuses == {failed["id"]: "discontinued", second: "running"}
        price = Decimal(running["deployment"]["price_per_hour_with_fees"])
        entries = await ledger(client, handle)
        assert amounts(entries, "debit") == [paid, price]
        balance = await account_view(client, handle)
        assert (Decimal(balance["balance"]), Decimal(balance["held"])) == (
            CREDIT - price,
            Decimal(0),
        )
        assert await unowned_clusters(client, handle, sim) == []


class TestDiscontinueRefused:
    async def test_a_refused_discontinue_is_sent_again_until_the_cluster_is_gone(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit=str(CREDIT))
        order_id = await place(client, handle, h200())
        await sim.stock(*VERDA_16H200, 1)
        running = await reaches(client, handle, order_id, "running", seconds=15)
        await sim.fault("verda", "delete_refused", count=1)

        answer = await client.post(f"/v1/orders/{order_id}/terminate", headers=handle.headers)
        assert answer.status_code == 202, answer.text
        ended = await reaches(client, handle, order_id, "terminated", seconds=15)

        discontinues = [
            r
            for r in await sim.requests("verda")
            if (r["method"], r["path"]) == ("PUT", "/v1/clusters")
        ]
        assert len(discontinues) >= 2  # the refused one, and the one taken
        assert "delete_retry" in await events(client, handle, order_id)
        (cluster,) = await sim.clusters("verda")
        assert cluster["status"] == "discontinued"
        assert f"cluster:{cluster['id']}" == running["deployment"]["provider_vm_id"]
        # The ledger adds up: the first hour paid, what was not used of it refunded.
        entries = await ledger(client, handle)
        price = Decimal(running["deployment"]["price_per_hour_with_fees"])
        (paid,) = amounts(entries, "debit")
        assert paid == price
        charged = Decimal(ended["charged_usd"])
        assert sum(amounts(entries, "refund"), Decimal(0)) == paid - charged
        balance = await account_view(client, handle)
        assert (Decimal(balance["balance"]), Decimal(balance["held"])) == (
            CREDIT - charged,
            Decimal(0),
        )
        assert 0 < charged < price
        assert await unowned_clusters(client, handle, sim) == []
