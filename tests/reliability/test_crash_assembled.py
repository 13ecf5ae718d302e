"""SIGKILL the service while it assembles a Hyperstack cluster from single VMs, restart it: the
order ends up with the whole cluster, or with no node at all and waiting, never with part of
one or a node nobody owns.

The node creates go out together; the kill lands while one node's answer is held back by the
simulator (its VM made), with the other node made too, or refused for capacity. The
simulators run in their own process and outlive the service, as Hyperstack would.
"""

from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from tests.crash_checks import CrashAccount
from tests.processes import ServiceProcess, SimProcess
from tests.waiting import eventually_sync

H100 = ("hyperstack", "n3-H100x1", "CANADA-1")  # $2.40/h a node
CREDIT = Decimal(100)


class AssemblyRun:
    """One account, one 2-node H100 order at Hyperstack, and what must hold for it."""

    def __init__(self, service: ServiceProcess, sim_process: SimProcess) -> None:
        self.sim = sim_process.control
        self.sim.reset_all(boot_seconds=0.3)
        self.api = httpx.Client(base_url=service.url, timeout=10)
        self.account = CrashAccount(self.api, CREDIT)
        body = {
            "gpu_model": "H100",
            "gpu_count": 1,
            "nodes": 2,
            "providers": ["hyperstack"],
            "max_price_per_hour": "6.00",
        }
        placed = self.api.post("/v1/orders", json=body, headers=self.account.headers)
        assert placed.status_code == 201, placed.text
        self.order_id: str = placed.json()["id"]
        self.token = self.order_id.removeprefix("ord_")

    def creates(self) -> list[dict[str, Any]]:
        return list(self.sim.creates("hyperstack"))

    def nodes(self) -> list[dict[str, Any]]:
        """The order's VMs at the simulator that are not being deleted."""
        return [
            vm
            for vm in self.sim.vms("hyperstack")
            if vm["name"].startswith(f"ap-{self.token}-")
            and vm["status"] not in ("DELETING", "DELETED")
        ]

    def both_creates_answered_or_held(self) -> None:
        """Both node creates reached the simulator (one answer is held back)."""
        eventually_sync(lambda: len(self.creates()) == 2 or None, 10, 0.01, what="2 creates")

    def order(self) -> dict[str, Any]:
        shown: dict[str, Any] = self.api.get(
            f"/v1/orders/{self.order_id}", headers=self.account.headers
        ).json()
        return shown

    def reaches(self, service: ServiceProcess, status: str, seconds: float = 30) -> dict[str, Any]:
        self.api.base_url = httpx.URL(service.url)

        def reached() -> dict[str, Any] | None:
            shown = self.order()
            return shown if shown["status"] == status else None

        return eventually_sync(reached, seconds, what=lambda: self.order()["status"])

    def check_whole_cluster(
        self, database_url: str, running: dict[str, Any], *, attempt: int = 1
    ) -> None:
        """Both nodes the order's, from its attempt `attempt`; one debit; nothing held."""
        live = self.nodes()
        assert len(live) == 2, live
        assert sorted(m["provider_vm_id"] for m in running["machines"]) == sorted(
            vm["id"] for vm in live
        )
        assert running["deployment"]["provider_vm_id"] == f"nodes:ap-{self.token}-{attempt}"
        self.account.check_paid_once(database_url, [self.order_id])


def test_killed_while_both_node_creates_are_answered_late(
    database_url: str, sim_process: SimProcess, tmp_path: Path
) -> None:
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    run = AssemblyRun(service, sim_process)
    run.sim.fault("hyperstack", "create_delay", count=2, seconds=3)  # made, answers held
    run.sim.stock(*H100, 3)  # room for a wrong third node
    run.both_creates_answered_or_held()
    service.kill()
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    try:
        running = run.reaches(service, "running")
        run.check_whole_cluster(database_url, running)
        assert [c["outcome"] for c in run.creates()] == ["created", "created"]
    finally:
        service.terminate()


def test_killed_with_one_node_made_and_the_other_refused(
    database_url: str, sim_process: SimProcess, tmp_path: Path
) -> None:
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    run = AssemblyRun(service, sim_process)
    run.sim.fault("hyperstack", "capacity_race")  # one node refused
    run.sim.fault("hyperstack", "create_delay", seconds=3)  # the other made, its answer held
    run.sim.stock(*H100, 2)
    run.both_creates_answered_or_held()
    service.kill()
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    try:
        # After the restart the node made is found, deleted, and the order waits, unpaid.
        eventually_sync(lambda: run.nodes() == [] or None, 30, what=run.nodes)
        waiting = run.reaches(service, "waiting")
        assert Decimal(waiting["charged_usd"]) == 0
        balance = run.api.get("/v1/account", headers=run.account.headers).json()
        assert (Decimal(balance["balance"]), Decimal(balance["held"])) == (CREDIT, Decimal(0))
        assert sorted(c["outcome"] for c in run.creates()) == ["capacity_race", "created"]
        # The next appearance of two deploys both.
        run.sim.stock(*H100, 2)
        running = run.reaches(service, "running")
        run.check_whole_cluster(database_url, running, attempt=2)
    finally:
        service.terminate()
