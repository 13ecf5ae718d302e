"""Ending a Verda machine as Verda's own document says deletes answer, end to end (REST API in,
the simulated Verda out, both databases): a refusal is `forbidden_action` (403), which is a
refusal to read the VM again after, never a credentials problem, and the OS volume goes for
good, not to the trash."""

from decimal import Decimal
from typing import Any

import httpx
import pytest

from app.settings import Settings
from app.simulators.control import SimControl
from tests.factories import AccountHandle, create_account
from tests.waiting import eventually
from tests.watcher.orders import VERDA_H100, h100, place, reaches


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Real-length billing hours (a machine terminated within seconds used one block); running
    machines read every 0.2 s, the reconciler sweeping every second."""
    return settings.model_copy(
        update={
            "billing_hour_seconds": 3600.0,
            "running_check_seconds": 0.2,
            "reconcile_seconds": 1.0,
        }
    )


async def running_verda_order(
    client: httpx.AsyncClient, sim: SimControl
) -> tuple[AccountHandle, str, str]:
    handle = await create_account(client, credit="50")
    order_id = await place(client, handle, h100(providers=["verda"]))
    await sim.stock(*VERDA_H100, 1)
    running = await reaches(client, handle, order_id, "running")
    return handle, order_id, running["deployment"]["provider_vm_id"]


async def terminate(client: httpx.AsyncClient, handle: AccountHandle, order_id: str) -> None:
    answer = await client.post(f"/v1/orders/{order_id}/terminate", headers=handle.headers)
    assert answer.status_code == 202, answer.text


async def refunds(client: httpx.AsyncClient, handle: AccountHandle, order_id: str) -> list[Any]:
    answer = await client.get("/v1/account/ledger?limit=100", headers=handle.headers)
    rows = answer.json()["data"]
    return [r for r in rows if r["kind"] == "refund" and r["order_id"] == order_id]


async def deletes_sent(sim: SimControl) -> list[dict[str, Any]]:
    return [
        r
        for r in await sim.requests("verda")
        if (r["method"], r["path"]) == ("PUT", "/v1/instances")
    ]


async def test_a_delete_refused_403_forbidden_action_goes_again_until_taken(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    handle, order_id, _ = await running_verda_order(client, sim)
    await sim.fault("verda", "delete_refused", count=2)
    await terminate(client, handle, order_id)
    ended = await reaches(client, handle, order_id, "terminated", seconds=15)
    assert [r["status"] for r in await deletes_sent(sim)] == [403, 403, 202]
    (refund,) = await refunds(client, handle, order_id)
    assert Decimal(refund["amount"]) + Decimal(ended["charged_usd"]) == Decimal(
        ended["deployment"]["price_per_hour_with_fees"]
    )


async def test_a_delete_taken_whose_answer_was_lost_settles_once_the_vm_is_read_gone(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    """Verda took the delete but the answer never came (the client timed out). Sent again, it
    would be refused 403 `forbidden_action` ("Can't discontinue a discontinued instance"), which
    was read as bad credentials, forever: the instance is read first now, found gone, and the
    order ends refunded once, with its OS volume deleted by the one delete that went."""
    handle, order_id, vm_id = await running_verda_order(client, sim)
    await sim.fault("verda", "delete_delay", seconds=3.0)  # past the 2 s provider timeout
    await terminate(client, handle, order_id)
    await reaches(client, handle, order_id, "terminated", seconds=15)
    assert len(await refunds(client, handle, order_id)) == 1
    (vm,) = [v for v in await sim.vms("verda") if v["id"] == vm_id]
    assert (vm["status"], vm["os_volume_status"]) == ("discontinued", "deleted")


async def test_a_volume_left_behind_by_a_machine_verda_ended_is_deleted_by_the_reconciler(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    """Verda ended the instance by itself; what it did with the OS volume is not documented,
    and left detached it would bill on: the reconciler finds it ours, its machine gone, and
    deletes it for good."""
    handle, order_id, vm_id = await running_verda_order(client, sim)
    await sim.end_vm("verda", vm_id)
    await reaches(client, handle, order_id, "lost", seconds=10)

    async def deleted() -> bool:
        volumes = await sim.volumes("verda")
        return [(v["vm_id"], v["status"]) for v in volumes] == [(vm_id, "deleted")]

    await eventually(deleted, 10)
    assert (await sim._send("GET", "verda", "balance"))["hourly_charge"] == "0"
