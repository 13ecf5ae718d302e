"""SIGKILL the service between a terminate's intent and its outcome, restart it: the VM is
deleted, the order terminated, the unused part refunded once. The simulators run in their own
process and outlive the service, as a real provider would.

The intent is committed by the API; the delete is sent by the watcher. A process running the
API without the watcher (`AUTOPROVISION_WATCHER=false`) commits the intent and can never send
the delete, so killing it is exactly "killed after the intent, before the delete".
"""

import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from app.core.states import LedgerKind
from app.storage.models import LedgerEntry
from tests.factories import ADMIN
from tests.processes import ServiceProcess, SimProcess, query
from tests.waiting import eventually_sync

HYPER_H100 = ("n3-H100x1", "CANADA-1")  # $2.40672/h with its public IP: $2.41, no fees here
DELETE = ("DELETE", "/v1/core/virtual-machines/")


class Account:
    """One account with $10 and its order for 1x H100 at `provider`, through the REST API."""

    def __init__(self, service: ServiceProcess, provider: str = "hyperstack") -> None:
        self.api = httpx.Client(base_url=service.url, timeout=10)
        created = self.api.post("/v1/accounts", json={"name": "kill"}, headers=ADMIN).json()
        self.id, self.headers = created["id"], {"Authorization": f"Bearer {created['api_key']}"}
        self.api.post(f"/v1/accounts/{self.id}/credits", json={"amount": "10"}, headers=ADMIN)
        body = {"gpu_model": "H100", "gpu_count": 1, "providers": [provider],
                "max_price_per_hour": "3.00"}  # fmt: skip
        self.order_id: str = self.api.post("/v1/orders", json=body, headers=self.headers).json()[
            "id"
        ]

    def use(self, service: ServiceProcess) -> None:
        self.api.base_url = httpx.URL(service.url)

    def order(self) -> dict[str, Any]:
        shown: dict[str, Any] = self.api.get(
            f"/v1/orders/{self.order_id}", headers=self.headers
        ).json()
        return shown

    def reaches(self, status: str, seconds: float = 30) -> dict[str, Any]:
        return eventually_sync(
            lambda: (order := self.order())["status"] == status and order, seconds
        )


def deletes(sim_process: SimProcess, vm_id: str) -> list[dict[str, Any]]:
    return [
        r
        for r in sim_process.control.requests("hyperstack")
        if (r["method"], r["path"]) == (DELETE[0], DELETE[1] + vm_id)
    ]


def refunded_once(database_url: str, order_id: str, amount: str) -> None:
    refunds = query(
        database_url,
        select(LedgerEntry.amount).where(
            LedgerEntry.order_id == order_id, LedgerEntry.kind == LedgerKind.REFUND
        ),
    )
    assert [r.amount for r in refunds] == [Decimal(amount)]


def running_machine(
    tmp_path: Path, database_url: str, sim_process: SimProcess
) -> tuple[ServiceProcess, Account, str]:
    sim_process.control.reset_all(boot_seconds=0.3)
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    account = Account(service)
    sim_process.control.stock("hyperstack", *HYPER_H100, 1)
    running = account.reaches("running")
    return service, account, running["deployment"]["provider_vm_id"]


def test_killed_after_the_intent_and_before_the_delete(
    database_url: str, sim_process: SimProcess, tmp_path: Path
) -> None:
    service, account, vm_id = running_machine(tmp_path, database_url, sim_process)
    service.kill()
    api_only = ServiceProcess(tmp_path, database_url, sim_process, watcher="false").wait_until_up()
    account.use(api_only)
    answer = account.api.post(f"/v1/orders/{account.order_id}/terminate", headers=account.headers)
    assert (answer.status_code, answer.json()["status"]) == (202, "terminating")
    api_only.kill()
    assert deletes(sim_process, vm_id) == []  # the intent is committed, nothing was sent
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    account.use(service)
    try:
        ended = account.reaches("terminated")
        assert len(deletes(sim_process, vm_id)) == 1  # the positive control: the restart sent it
        assert all(vm["id"] != vm_id or vm["status"] in ("DELETING", "DELETED")
                   for vm in sim_process.control.vms("hyperstack"))  # fmt: skip
        # Hyperstack bills per minute begun; the kill and restart took well under a minute.
        assert ended["charged_usd"] == "0.04"
        refunded_once(database_url, account.order_id, "2.37")
    finally:
        service.terminate()


def test_killed_while_the_delete_is_in_flight(
    database_url: str, sim_process: SimProcess, tmp_path: Path
) -> None:
    service, account, vm_id = running_machine(tmp_path, database_url, sim_process)
    sim_process.control.fault("hyperstack", "delete_delay", seconds=3)  # taken, the answer waits
    answer = account.api.post(f"/v1/orders/{account.order_id}/terminate", headers=account.headers)
    assert answer.status_code == 202
    eventually_sync(lambda: deletes(sim_process, vm_id), seconds=10)
    service.kill()
    started = time.time()
    service = ServiceProcess(tmp_path, database_url, sim_process).wait_until_up()
    account.use(service)
    try:
        ended = account.reaches("terminated")
        assert ended["charged_usd"] == "0.04"
        refunded_once(database_url, account.order_id, "2.37")
        # The restart asked again (the first answer never came): harmless, it was gone.
        first, again = deletes(sim_process, vm_id)
        assert first["received_at"] < started <= again["received_at"]
    finally:
        service.terminate()


def test_killed_after_a_terminate_in_the_paid_hour_pays_the_hour_the_provider_bills(
    database_url: str, sim_process: SimProcess, tmp_path: Path
) -> None:
    """The terminate is committed within the paid hour, the process dies, and the delete goes
    only after the next hour began: QuantaCloud bills that hour, and so must the account."""
    hour = 8.0  # seconds, at the service and at the simulated provider alike
    sim_process.control.reset_all(boot_seconds=0.3)
    sim_process.control.config("quantacloud", hour_seconds=hour)
    service = ServiceProcess(
        tmp_path, database_url, sim_process, billing_hour_seconds=hour
    ).wait_until_up()
    account = Account(service, provider="quantacloud")
    sim_process.control.stock("quantacloud", "h100-sxm-x1", "us-midwest-4", 1)
    paid_until = datetime.fromisoformat(account.reaches("running")["paid_until"])
    service.kill()
    api_only = ServiceProcess(
        tmp_path, database_url, sim_process, billing_hour_seconds=hour, watcher="false"
    ).wait_until_up()
    account.use(api_only)
    # Stimuli at moments of the billing clock; nothing is awaited by sleeping.
    time.sleep(max(0.0, (paid_until - datetime.now(UTC)).total_seconds() - 1.0))
    answer = account.api.post(f"/v1/orders/{account.order_id}/terminate", headers=account.headers)
    assert (answer.status_code, answer.json()["status"]) == (202, "terminating")
    api_only.kill()
    time.sleep(max(0.0, (paid_until - datetime.now(UTC)).total_seconds() + 0.5))
    service = ServiceProcess(
        tmp_path, database_url, sim_process, billing_hour_seconds=hour
    ).wait_until_up()
    account.use(service)
    try:
        ended = account.reaches("terminated")
        (vm,) = [v for v in sim_process.control.vms("quantacloud")
                 if v["id"] == ended["deployment"]["provider_vm_id"]]  # fmt: skip
        price = Decimal(ended["deployment"]["price_per_hour_with_fees"])
        billed_hours = Decimal(vm["charged"]) / Decimal(vm["price_per_hour"])
        assert billed_hours == 2  # the control: the provider billed the hour begun
        assert Decimal(ended["charged_usd"]) == 2 * price
    finally:
        service.terminate()
