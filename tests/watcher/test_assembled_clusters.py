"""A cluster at a provider that sells none (Hyperstack): N single VMs created together, all or
nothing. Every partial outcome ends with every node made deleted, the hour refunded and the
order waiting, or with the whole cluster the order's; never a node no order owns.

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
from tests.watcher.orders import account_view, order, place, reaches, timeline

H100 = ("hyperstack", "n3-H100x1", "CANADA-1")  # $2.40672/h a node, its public IP included
CREDIT = Decimal("100")
COOLDOWN_SECONDS = 120.0  # a capacity error keeps the offer cool while a test looks on


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Real-length billing hours; running machines read every 0.2 s; long capacity cool-downs."""
    return settings.model_copy(
        update={
            "billing_hour_seconds": 3600.0,
            "running_check_seconds": 0.2,
            "capacity_cooldown_seconds": COOLDOWN_SECONDS,
        }
    )


def two_h100(**overrides: Any) -> dict[str, Any]:
    """2 nodes of 1 H100 at Hyperstack, up to $6/h for both."""
    body = {
        "gpu_model": "H100",
        "gpu_count": 1,
        "nodes": 2,
        "providers": ["hyperstack"],
        "max_price_per_hour": "6.00",
        **overrides,
    }
    return order_body(**body)


async def creates(sim: SimControl) -> list[dict[str, Any]]:
    return list(await sim.creates("hyperstack"))


async def live_vms(sim: SimControl) -> list[dict[str, Any]]:
    """The simulator's VMs not deleted."""
    return [vm for vm in await sim.vms("hyperstack") if vm["status"] not in ("DELETING", "DELETED")]


async def unowned_nodes(
    client: httpx.AsyncClient, handle: AccountHandle, sim: SimControl
) -> list[dict[str, Any]]:
    """Live VMs at the simulator that are no deployed or running order's machine."""
    listed = (await client.get("/v1/orders", headers=handle.headers)).json()["data"]
    owned = {
        m["provider_vm_id"]
        for o in listed
        if o["status"] in ("deployed", "running")
        for m in o["machines"]
    }
    return [vm for vm in await live_vms(sim) if vm["id"] not in owned]


async def lines(client: httpx.AsyncClient, handle: AccountHandle, order_id: str) -> list[str]:
    answer = await client.get(f"/v1/orders/{order_id}/events", headers=handle.headers)
    return [e["message"] for e in answer.json()]


async def waits_again_refunded(
    client: httpx.AsyncClient, handle: AccountHandle, sim: SimControl, order_id: str
) -> dict[str, Any]:
    """Once both node creates went out: the order waits again with nothing charged, and no
    node of it is left at Hyperstack."""

    async def both_sent() -> bool | None:
        return True if len(await creates(sim)) >= 2 else None

    await eventually(both_sent, 10)

    async def settled() -> dict[str, Any] | None:
        shown = await order(client, handle, order_id)
        if shown["status"] != "waiting" or await live_vms(sim):
            return None
        return shown

    shown = await eventually(settled, 15)
    assert Decimal(shown["charged_usd"]) == 0
    account = await account_view(client, handle)
    assert (Decimal(account["balance"]), Decimal(account["held"])) == (CREDIT, Decimal(0))
    return shown


class TestAllOrNothing:
    async def test_stock_for_one_sends_nothing_and_stock_for_two_deploys_both(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit=str(CREDIT))
        cluster = await place(client, handle, two_h100())
        single = await place(client, handle, two_h100(nodes=1, max_price_per_hour="3.00"))
        await sim.stock(*H100, 1)
        await reaches(client, handle, single, "running", seconds=10)
        # The one machine in stock went to the single order; the cluster sent nothing.
        assert len(await creates(sim)) == 1
        assert (await order(client, handle, cluster))["status"] == "waiting"

        await sim.stock(*H100, 2)  # positive control: two at once
        running = await reaches(client, handle, cluster, "running", seconds=10)
        token = cluster.removeprefix("ord_")
        made = [c for c in await creates(sim) if c["name"].startswith(f"ap-{token}")]
        assert sorted(c["name"] for c in made) == [f"ap-{token}-1-1", f"ap-{token}-1-2"]
        assert all(c["outcome"] == "created" for c in made)
        deployment = running["deployment"]
        assert (deployment["instance_type"], deployment["nodes"]) == ("n3-H100x1.x2", 2)
        assert deployment["provider_vm_id"] == f"nodes:ap-{token}-1"
        # Each node has its public IP: 2 x $2.40672.
        assert Decimal(deployment["price_per_hour"]) == Decimal("4.81344")
        assert running["charged_usd"] == deployment["price_per_hour_with_fees"]
        machines = running["machines"]
        assert sorted(m["provider_vm_id"] for m in machines) == sorted(c["vm_id"] for c in made)
        assert all(m["state"] == "running" and m["ip"] for m in machines)
        assert running["login_ip"] == machines[0]["ip"]

        answer = await client.post(f"/v1/orders/{cluster}/terminate", headers=handle.headers)
        assert answer.status_code == 202, answer.text
        ended = await reaches(client, handle, cluster, "terminated", seconds=10)
        await eventually(lambda: _none_of(sim, {c["vm_id"] for c in made}), 10)
        # The timeline names the nodes by their name, never by our composite id.
        said = " ".join(e["message"] for e in await timeline(client, handle, cluster))
        assert f"cluster ap-{token}-1" in said and "nodes:" not in said
        assert [m["state"] for m in ended["machines"]] == ["gone", "gone"]

    async def test_a_node_refused_for_capacity_takes_the_cluster_apart_until_two_show(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit=str(CREDIT))
        order_id = await place(client, handle, two_h100())
        await sim.fault("hyperstack", "capacity_race")
        await sim.stock(*H100, 2)
        shown = await waits_again_refunded(client, handle, sim, order_id)
        outcomes = sorted(c["outcome"] for c in await creates(sim))
        assert outcomes == ["capacity_race", "created"]
        said = await lines(client, handle, order_id)
        assert any("made 1 of the cluster's 2 nodes" in line for line in said), said
        assert shown["deployment"]["status"] == "failed"
        assert "order.deployed" not in await _webhook_kinds(client, handle, order_id)

        await sim.stock(*H100, 2)  # the next appearance of two deploys both
        running = await reaches(client, handle, order_id, "running", seconds=10)
        assert running["deployment"]["nodes"] == 2 and len(running["machines"]) == 2
        assert await unowned_nodes(client, handle, sim) == []


class TestPartialOutcomes:
    async def test_an_unclear_node_create_is_looked_up_and_the_whole_cluster_adopted(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit=str(CREDIT))
        order_id = await place(client, handle, two_h100())
        await sim.fault("hyperstack", "create_error_after_commit")  # made, answered 500
        await sim.stock(*H100, 3)  # room for a wrong third node
        running = await reaches(client, handle, order_id, "running", seconds=15)
        outcomes = sorted(c["outcome"] for c in await creates(sim))
        assert outcomes == ["created", "error_after_commit"]
        assert len(running["machines"]) == 2
        assert await unowned_nodes(client, handle, sim) == []
        assert running["charged_usd"] == running["deployment"]["price_per_hour_with_fees"]
        said = await lines(client, handle, order_id)
        assert any("Found the VM the unclear create made" in line for line in said), said

    async def test_an_unclear_node_beside_a_refused_one_is_found_and_taken_apart(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit=str(CREDIT))
        order_id = await place(client, handle, two_h100())
        await sim.fault("hyperstack", "capacity_race")
        await sim.fault("hyperstack", "create_error_after_commit")
        await sim.stock(*H100, 2)
        await waits_again_refunded(client, handle, sim, order_id)
        outcomes = sorted(c["outcome"] for c in await creates(sim))
        assert outcomes == ["capacity_race", "error_after_commit"]

    async def test_a_node_failing_after_accept_takes_the_cluster_apart_and_refunds(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit=str(CREDIT))
        order_id = await place(client, handle, two_h100())
        await sim.fault("hyperstack", "fail_after_accept")
        await sim.stock(*H100, 2)
        shown = await waits_again_refunded(client, handle, sim, order_id)
        assert shown["deployment"]["status"] == "failed"
        said = await lines(client, handle, order_id)
        assert any("ended 1 of the cluster's 2 nodes before all ran" in x for x in said), said
        assert any("refunded" in line for line in said), said

    async def test_a_node_lost_while_it_runs_is_said_once(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit=str(CREDIT))
        order_id = await place(client, handle, two_h100())
        await sim.stock(*H100, 2)
        running = await reaches(client, handle, order_id, "running", seconds=10)
        lost = running["machines"][1]["provider_vm_id"]
        await sim.end_vm("hyperstack", lost)

        async def node_lost() -> list[str] | None:
            said = [x for x in await lines(client, handle, order_id) if "lost 1 of" in x]
            return said or None

        (line,) = await eventually(node_lost, 10)
        assert lost in line and "1 left" in line
        shown = await order(client, handle, order_id)
        assert shown["status"] == "running"
        assert [m["state"] for m in shown["machines"] if m["provider_vm_id"] == lost] != ["running"]


class TestAssemblyDeadline:
    @pytest.fixture
    def settings(self, settings: Settings) -> Settings:
        """Nodes must all run within 1.2 s of the creates."""
        return settings.model_copy(update={"cluster_assembly_minutes": 0.02})

    @pytest.fixture
    def sim_boot_seconds(self) -> float:
        """Nodes take 6 s to boot (and refuse deletes while they do): past the deadline."""
        return 6.0

    async def test_nodes_not_all_running_in_time_are_deleted_and_the_order_waits(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit=str(CREDIT))
        order_id = await place(client, handle, two_h100())
        await sim.stock(*H100, 2)
        shown = await waits_again_refunded(client, handle, sim, order_id)
        assert shown["running_since"] is None
        said = await lines(client, handle, order_id)
        assert any("were not all running 0.02 minutes after" in x for x in said), said


class TestAssemblyInTime:
    @pytest.fixture
    def sim_boot_seconds(self) -> float:
        """The same 6 s boots as TestAssemblyDeadline, under the default 15-minute deadline."""
        return 6.0

    async def test_positive_control_nodes_slow_to_boot_run_within_the_deadline(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit=str(CREDIT))
        order_id = await place(client, handle, two_h100())
        await sim.stock(*H100, 2)
        running = await reaches(client, handle, order_id, "running", seconds=20)
        assert len(running["machines"]) == 2


async def _none_of(sim: SimControl, ids: set[str]) -> bool | None:
    return True if not {vm["id"] for vm in await live_vms(sim)} & ids else None


async def _webhook_kinds(
    client: httpx.AsyncClient, handle: AccountHandle, order_id: str
) -> list[str]:
    answer = await client.get("/v1/events", headers=handle.headers)
    assert answer.status_code == 200, answer.text
    return [e["type"] for e in answer.json()["data"] if e.get("order_id") == order_id]
