"""SIGKILL the service while it deploys a Verda cluster, restart it: the order runs on exactly
one cluster, made by exactly one create, paid for once.

A cluster is one provider object made by one create (`POST /v1/clusters`) and found again by
its hostname, the attempt's VM name. The simulators run in their own process and outlive the
service, as Verda would.
"""

from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from tests.crash_checks import CrashAccount
from tests.processes import ServiceProcess, SimProcess
from tests.waiting import eventually_sync

VERDA_16H200 = ("verda", "16H200", "FIN-01")  # 2 nodes of 8 H200
CREDIT = Decimal(200)  # more than one hour of the cluster


class ClusterRun:
    """One account, one 2-node H200 order at Verda, and what must hold for it."""

    def __init__(self, service: ServiceProcess, sim_process: SimProcess) -> None:
        self.sim = sim_process.control
        self.sim.reset_all(boot_seconds=0.3)
        self.api = httpx.Client(base_url=service.url, timeout=10)
        self.account = CrashAccount(self.api, CREDIT)
        body = {
            "gpu_model": "H200",
            "gpu_count": 8,
            "nodes": 2,
            "providers": ["verda"],
            "max_price_per_hour": "70.00",
        }
        placed = self.api.post("/v1/orders", json=body, headers=self.account.headers)
        assert placed.status_code == 201, placed.text
        self.order_id: str = placed.json()["id"]

    def creates(self) -> list[dict[str, Any]]:
        return [c for c in self.sim.creates("verda") if c["kind"] == "cluster"]

    def deploy_into(self, fault: str, **extra: Any) -> None:
        """Queue `fault` for the cluster create, stock room for two clusters (one for a wrong
        second create), and wait until the simulator has recorded the create."""
        self.sim.fault("verda", fault, **extra)
        self.sim.stock(*VERDA_16H200, 2)
        eventually_sync(self.creates, 10, 0.01, what="a cluster create at verda")

    def order(self) -> dict[str, Any]:
        shown: dict[str, Any] = self.api.get(
            f"/v1/orders/{self.order_id}", headers=self.account.headers
        ).json()
        return shown

    def wait_until_running(self, service: ServiceProcess, seconds: float = 30) -> dict[str, Any]:
        self.api.base_url = httpx.URL(service.url)

        def running() -> dict[str, Any] | None:
            shown = self.order()
            return shown if shown["status"] == "running" else None

        return eventually_sync(running, seconds, what=lambda: self.order()["status"])

    def check(self, database_url: str, running: dict[str, Any]) -> None:
        """One cluster for the order, not discontinued, the one it runs on, from one create;
        one debit at the order's own price; no open hold; the balance adds up."""
        token = self.order_id.removeprefix("ord_")
        live = [
            c
            for c in self.sim.clusters("verda")
            if c["name"].startswith(f"ap-{token}-") and c["status"] != "discontinued"
        ]
        assert len(live) == 1, f"{self.order_id} has {len(live)} clusters: {live}"
        assert running["deployment"]["provider_vm_id"] == f"cluster:{live[0]['id']}"
        (create,) = self.creates()
        assert create["vm_id"] == live[0]["id"]
        # Positive control for "one create": a second cluster was in stock all along.
        (kind,) = [
            k for k in self.sim.catalog("verda") if (k["sku"], k["region"]) == VERDA_16H200[1:]
        ]
        assert kind["stock"] == 1
        self.account.check_paid_once(database_url, [self.order_id])
        price = Decimal(running["deployment"]["price_per_hour_with_fees"])
        balance = self.api.get("/v1/account", headers=self.account.headers).json()
        assert Decimal(balance["balance"]) == CREDIT - price


def test_killed_while_a_cluster_create_is_in_flight(
    database_url: str, sim_process: SimProcess, tmp_path: Path
) -> None:
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    run = ClusterRun(service, sim_process)
    run.deploy_into("create_delay", seconds=3)  # the cluster is made, the answer waits
    service.kill()
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    try:
        running = run.wait_until_running(service)
        run.check(database_url, running)
        assert [c["outcome"] for c in run.creates()] == ["created"]
    finally:
        service.terminate()


def test_killed_after_the_answer_to_a_cluster_create_was_lost(
    database_url: str, sim_process: SimProcess, tmp_path: Path
) -> None:
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    run = ClusterRun(service, sim_process)
    run.deploy_into("create_error_after_commit")  # the cluster is made, the answer is a 500
    service.kill()
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    try:
        running = run.wait_until_running(service)
        run.check(database_url, running)
        assert [c["outcome"] for c in run.creates()] == ["error_after_commit"]
    finally:
        service.terminate()
