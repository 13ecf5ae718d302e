"""SIGKILL the service mid-deploy, restart it: every order ends with exactly one VM and one debit.

The simulators run in their own process and outlive the service, as a real provider would.
"""

import random
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from app.core.states import LedgerKind
from app.storage.models import Attempt, LedgerEntry, Order
from tests.crash_checks import CrashAccount
from tests.processes import ServiceProcess, SimProcess, query
from tests.waiting import eventually_sync

MACHINES = {
    "hyperstack": ("n3-H100x1", "CANADA-1", "H100"),
    "verda": ("1H100.80S.30V", "FIN-01", "H100"),
}
KILL_RUNS = 20


def stock_reads(service: ServiceProcess) -> Counter[str]:
    """Stock reads the service has completed, per provider (from its /metrics)."""
    text = httpx.get(f"{service.url}/metrics", timeout=10).text
    reads: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "autoprovision_poll_seconds_count":
                reads[sample.labels["provider"]] = int(sample.value)
    return reads


def read_twice_since(service: ServiceProcess, before: Counter[str]) -> None:
    """Wait until every provider has been read twice more: with nobody waiting none is read,
    so this means the watcher has seen the new orders."""

    def read() -> bool:
        now = stock_reads(service)
        return all(now[p] >= before[p] + 2 for p in MACHINES)

    eventually_sync(read, seconds=10)


class Run:
    """One account, some orders, and the checks that must hold for them."""

    def __init__(self, service: ServiceProcess, sim_process: SimProcess) -> None:
        self.sim = sim_process.control
        self.api = httpx.Client(base_url=service.url, timeout=10)
        self.use(service)
        self.account = CrashAccount(self.api, Decimal(100))
        self.headers = self.account.headers
        self.orders: dict[str, str] = {}  # order id -> provider

    def use(self, service: ServiceProcess) -> None:
        """Talk to this (restarted) service from now on."""
        self.api.base_url = httpx.URL(service.url)

    def reset_sim(self) -> None:
        self.sim.reset_all(boot_seconds=0.3)

    def place(self, provider: str) -> str:
        body = {
            "gpu_model": MACHINES[provider][2],
            "gpu_count": 1,
            "providers": [provider],
            "max_price_per_hour": "4.00",
        }
        order_id: str = self.api.post("/v1/orders", json=body, headers=self.headers).json()["id"]
        self.orders[order_id] = provider
        return order_id

    def stock(self, provider: str, quantity: int = 1) -> None:
        sku, region, _model = MACHINES[provider]
        self.sim.stock(provider, sku, region, quantity)

    def fault(self, provider: str, kind: str, **extra: Any) -> None:
        self.sim.fault(provider, kind, **extra)

    def creates(self, provider: str) -> list[dict[str, Any]]:
        return self.sim.creates(provider)

    def wait_for_create(self, provider: str, seconds: float = 10) -> None:
        eventually_sync(
            lambda: self.creates(provider), seconds, 0.01, what=f"a create at {provider}"
        )

    def wait_until_running(self, service: ServiceProcess, seconds: float = 30) -> None:
        self.use(service)

        def status(order_id: str) -> str:
            shown: str = self.api.get(f"/v1/orders/{order_id}", headers=self.headers).json()[
                "status"
            ]
            return shown

        eventually_sync(
            lambda: all(status(order_id) == "running" for order_id in self.orders),
            seconds,
            what=lambda: {order_id: status(order_id) for order_id in self.orders},
        )

    def check(self, database_url: str) -> None:
        """Exactly one live VM per order; one debit, no open hold, balance adds up."""
        for order_id, provider in self.orders.items():
            token = order_id.removeprefix("ord_")
            vms = [
                vm
                for vm in self.sim.vms(provider)
                if (vm["name"] or "").startswith(f"ap-{token}-")
                and vm["status"] not in ("DELETING", "DELETED", "deleting", "discontinued")
            ]
            assert len(vms) == 1, f"{order_id} has {len(vms)} VMs at {provider}: {vms}"
        self.account.check_paid_once(database_url, list(self.orders))


def test_killed_while_a_create_is_in_flight(
    database_url: str, sim_process: SimProcess, tmp_path: Path
) -> None:
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    run = Run(service, sim_process)
    run.reset_sim()
    run.place("hyperstack")
    run.fault("hyperstack", "create_delay", seconds=3)  # the VM is made, the answer waits
    run.stock("hyperstack")
    run.wait_for_create("hyperstack")
    service.kill()
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    try:
        run.wait_until_running(service)
        run.check(database_url)
        assert len(run.creates("hyperstack")) == 1
    finally:
        service.terminate()


def test_killed_after_the_answer_to_a_create_was_lost(
    database_url: str, sim_process: SimProcess, tmp_path: Path
) -> None:
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    run = Run(service, sim_process)
    run.reset_sim()
    run.place("verda")
    run.fault("verda", "create_error_after_commit")  # the VM is made, the answer is a 500
    run.stock("verda")
    run.wait_for_create("verda")
    service.kill()
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    try:
        run.wait_until_running(service)
        run.check(database_url)
        assert [c["outcome"] for c in run.creates("verda")] == ["error_after_commit"]
    finally:
        service.terminate()


def test_killed_at_random_moments(
    database_url: str, sim_process: SimProcess, tmp_path: Path
) -> None:
    rng = random.Random(20261129)
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    try:
        for round_number in range(KILL_RUNS):
            run = Run(service, sim_process)
            run.reset_sim()
            before = stock_reads(service)
            for provider in MACHINES:
                run.place(provider)
            read_twice_since(service, before)  # the watcher has seen the orders
            trouble = rng.choice([None, "create_delay", "create_error_after_commit"])
            if trouble:
                run.fault(rng.choice(list(MACHINES)), trouble, seconds=rng.uniform(0.2, 2.0))
            for provider in MACHINES:
                run.stock(provider, quantity=2)  # room for a (wrong) second VM to show up
            time.sleep(rng.uniform(0.0, 0.8))
            service.kill()
            service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
            run.wait_until_running(service)
            try:
                run.check(database_url)
            except AssertionError as exc:
                raise AssertionError(f"round {round_number} ({trouble}): {exc}") from exc
    finally:
        service.terminate()


def test_sigterm_lets_a_create_in_flight_finish(
    database_url: str, sim_process: SimProcess, tmp_path: Path
) -> None:
    service = ServiceProcess(
        tmp_path, database_url, sim_process, provider_create_timeout_seconds=5
    ).wait_until_up()
    run = Run(service, sim_process)
    run.reset_sim()
    order_id = run.place("hyperstack")
    run.fault("hyperstack", "create_delay", seconds=1.5)
    run.stock("hyperstack")
    run.wait_for_create("hyperstack")
    service.terminate()  # graceful: waits for the create's answer, records it, then exits
    # uvicorn re-raises the SIGTERM once its graceful shutdown is done: -15 is a clean exit
    assert service.process.returncode in (0, -15)
    (status,) = query(database_url, select(Order.status).where(Order.id == order_id))
    assert status.status == "deployed"
    attempts = query(database_url, select(Attempt.status).where(Attempt.order_id == order_id))
    assert [a.status for a in attempts] == ["deployed"]


def test_killed_between_two_unclear_creates_of_one_unnamed_kind(
    database_url: str, sim_process: SimProcess, tmp_path: Path
) -> None:
    """QuantaCloud's VMs carry no name: A's create makes a VM and answers 500, B is placed for
    the same kind, the service is killed and restarted. Each order ends on its own VM."""
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    run = Run(service, sim_process)
    run.reset_sim()
    body = {"gpu_model": "L40S", "gpu_count": 1, "providers": ["quantacloud"],
            "max_price_per_hour": "2.00"}  # fmt: skip
    first = run.api.post("/v1/orders", json=body, headers=run.headers).json()["id"]
    run.fault("quantacloud", "create_error_after_commit")
    run.fault("quantacloud", "create_delay", seconds=2)
    run.sim.stock("quantacloud", "l40s-x1", "us-east-1", 2)  # raises unless it succeeded
    run.wait_for_create("quantacloud")
    second = run.api.post("/v1/orders", json=body, headers=run.headers).json()["id"]
    run.orders = {first: "quantacloud", second: "quantacloud"}
    service.kill()
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    try:
        run.wait_until_running(service)
        creates = run.creates("quantacloud")
        assert [c["outcome"] for c in creates] == ["error_after_commit", "created"]
        owned = dict(
            query(
                database_url,
                select(Attempt.order_id, Attempt.provider_vm_id).where(Attempt.status == "running"),
            )
        )
        assert owned == {first: creates[0]["vm_id"], second: creates[1]["vm_id"]}
        debits = query(
            database_url,
            select(LedgerEntry.order_id).where(LedgerEntry.kind == LedgerKind.DEBIT),
        )
        assert sorted(d.order_id for d in debits) == sorted([first, second])
    finally:
        service.terminate()
