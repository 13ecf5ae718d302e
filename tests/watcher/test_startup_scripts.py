"""An order's start-up script, end to end: REST API in, simulators out, real adapters, both
databases. The script reaches each provider that runs one byte for byte (Verda's startup
scripts, Hyperstack's user data, every node of a cluster), never QuantaCloud, and Verda's
script is deleted once its VM is gone, so its 100-script quota never fills."""

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from app.settings import Settings
from app.simulators.control import SimControl
from tests.factories import AccountHandle, create_account, order_body
from tests.waiting import eventually
from tests.watcher.orders import HYPER_H100, VERDA_H100, order, place, reaches

# Multi-byte text, a tab, CRLF and a token: what arrives must be exactly what was sent.
SCRIPT = "#!/bin/bash\r\nexport HF_TOKEN=hf_s3cr3t\n\techo 'démarré ✓' > /tmp/ready\n"
QUANTA_H100 = ("quantacloud", "h100-sxm-x1", "us-midwest-4")  # $2.46/h: cheaper than Verda's
VERDA_16H200 = ("verda", "16H200", "FIN-01")  # 2 nodes of 8 H200


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Real-length billing hours, running machines read every 0.2 s, a reconcile each second."""
    return settings.model_copy(
        update={
            "billing_hour_seconds": 3600.0,
            "running_check_seconds": 0.2,
            "reconcile_seconds": 1.0,
        }
    )


def h100(providers: list[str], **overrides: Any) -> dict[str, Any]:
    """1x H100 at these providers, up to $3/h, with the script."""
    body = {
        "gpu_model": "H100",
        "gpu_count": 1,
        "providers": providers,
        "max_price_per_hour": "3.00",
        "startup_script": SCRIPT,
        **overrides,
    }
    return order_body(**body)


async def terminate(client: httpx.AsyncClient, handle: AccountHandle, order_id: str) -> None:
    answer = await client.post(f"/v1/orders/{order_id}/terminate", headers=handle.headers)
    assert answer.status_code == 202, answer.text


async def scripts(sim: SimControl) -> list[str]:
    return [s["name"] for s in await sim.startup_scripts("verda")]


def none_kept(sim: SimControl) -> Callable[[], Awaitable[bool]]:
    """A check for `eventually`: Verda keeps no start-up script."""

    async def check() -> bool:
        return await scripts(sim) == []

    return check


def vm_name(order_id: str, attempt: int = 1) -> str:
    return f"ap-{order_id.removeprefix('ord_')}-{attempt}"


class TestVerda:
    async def test_a_vm_gets_the_script_and_the_script_goes_with_the_vm(
        self, client: httpx.AsyncClient, sim: SimControl, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.DEBUG)
        handle = await create_account(client, credit="50")
        order_id = await place(client, handle, h100(["verda"]))
        await sim.stock(*VERDA_H100, 1)
        await reaches(client, handle, order_id, "running", seconds=10)
        (create,) = await sim.creates("verda")
        assert create["startup_script"] == SCRIPT
        (kept,) = await sim.startup_scripts("verda")  # kept while the VM is there
        assert (kept["name"], kept["script"]) == (vm_name(order_id), SCRIPT)

        await terminate(client, handle, order_id)
        await reaches(client, handle, order_id, "terminated", seconds=10)
        await eventually(none_kept(sim), 5)
        assert [r for r in caplog.records if "hf_s3cr3t" in r.getMessage()] == []

    async def test_a_cluster_gets_the_script_and_the_script_goes_with_it(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit="200")
        body = h100(["verda"], gpu_model="H200", gpu_count=8, nodes=2, max_price_per_hour="70")
        order_id = await place(client, handle, body)
        await sim.stock(*VERDA_16H200, 1)
        await reaches(client, handle, order_id, "running", seconds=10)
        (create,) = await sim.creates("verda")
        assert (create["kind"], create["startup_script"]) == ("cluster", SCRIPT)
        assert await scripts(sim) == [vm_name(order_id)]

        await terminate(client, handle, order_id)
        await reaches(client, handle, order_id, "terminated", seconds=10)
        await eventually(none_kept(sim), 5)

    async def test_a_create_refused_deletes_the_script_made_for_it(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit="50")
        order_id = await place(client, handle, h100(["verda"]))
        await sim.fault("verda", "capacity_race")
        await sim.stock(*VERDA_H100, 1)

        async def refused() -> list[dict[str, Any]] | None:
            creates = await sim.creates("verda")
            return creates if creates and creates[0]["outcome"] == "capacity_race" else None

        (first, *_) = await eventually(refused, 10)
        assert first["startup_script"] == SCRIPT  # the script was made and named in it
        await eventually(none_kept(sim), 5)
        assert (await order(client, handle, order_id))["status"] in ("waiting", "deploying")

    async def test_the_reconciler_deletes_a_script_left_behind_and_only_such(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit="50")
        order_id = await place(client, handle, h100(["verda"]))
        await sim.stock(*VERDA_H100, 1)
        await reaches(client, handle, order_id, "running", seconds=10)
        await terminate(client, handle, order_id)
        await reaches(client, handle, order_id, "terminated", seconds=10)
        await eventually(none_kept(sim), 5)
        # Left behind, as by a delete that failed or a process that stopped first: named after
        # the ended attempt. Beside it, the user's own script and one no attempt here knows.
        await sim.add_startup_script("verda", vm_name(order_id), SCRIPT)
        await sim.add_startup_script("verda", "my-own-script", "echo mine")
        await sim.add_startup_script("verda", "ap-unknown0000-1", "echo elsewhere")

        async def swept() -> list[str] | None:
            left = await scripts(sim)
            return left if vm_name(order_id) not in left else None

        assert sorted(await eventually(swept, 10)) == ["ap-unknown0000-1", "my-own-script"]

    async def test_a_script_left_behind_past_the_first_page_is_swept(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        """Verda lists scripts ten a page, newest first: one left behind before a dozen newer
        ones was never seen when only the first page was read."""
        handle = await create_account(client, credit="50")
        order_id = await place(client, handle, h100(["verda"]))
        await sim.stock(*VERDA_H100, 1)
        await reaches(client, handle, order_id, "running", seconds=10)
        await terminate(client, handle, order_id)
        await reaches(client, handle, order_id, "terminated", seconds=10)
        await eventually(none_kept(sim), 5)
        await sim.add_startup_script("verda", vm_name(order_id), SCRIPT)  # the oldest
        mine = [f"my-script-{n:02}" for n in range(12)]
        for name in mine:
            await sim.add_startup_script("verda", name, "echo mine")

        async def swept() -> list[str] | None:
            left = await scripts(sim)
            return left if vm_name(order_id) not in left else None

        assert sorted(await eventually(swept, 10)) == mine


class TestHyperstack:
    async def test_a_vm_gets_the_script_as_its_user_data(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit="50")
        order_id = await place(client, handle, h100(["hyperstack"]))
        await sim.stock(*HYPER_H100, 1)
        await reaches(client, handle, order_id, "running", seconds=10)
        (create,) = await sim.creates("hyperstack")
        assert (create["outcome"], create["startup_script"]) == ("created", SCRIPT)

    async def test_every_node_of_an_assembled_cluster_gets_the_script(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit="100")
        body = h100(["hyperstack"], nodes=2, max_price_per_hour="6.00")
        order_id = await place(client, handle, body)
        await sim.stock(*HYPER_H100, 2)
        await reaches(client, handle, order_id, "running", seconds=10)
        creates = await sim.creates("hyperstack")  # sent together: in either order
        assert sorted(c["name"] for c in creates) == [f"{vm_name(order_id)}-{n}" for n in (1, 2)]
        assert [c["startup_script"] for c in creates] == [SCRIPT, SCRIPT]


class TestQuantaCloud:
    async def test_an_order_with_a_script_never_deploys_there_but_elsewhere(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit="50")
        scripted = await place(client, handle, h100(["quantacloud", "verda"]))
        await sim.stock(*QUANTA_H100, 1)
        # Positive control: the stock is there and matchable; an order without a script,
        # placed after, takes it (the older scripted order cannot).
        plain = await place(client, handle, h100(["quantacloud"], startup_script=None))
        await reaches(client, handle, plain, "running", seconds=10)
        (create,) = await sim.creates("quantacloud")
        assert create["startup_script"] is None
        assert (await order(client, handle, scripted))["status"] == "waiting"

        await sim.stock(*QUANTA_H100, 1)
        await sim.stock(*VERDA_H100, 1)  # dearer, but it runs the script
        running = await reaches(client, handle, scripted, "running", seconds=10)
        assert running["deployment"]["provider"] == "verda"
        assert len(await sim.creates("quantacloud")) == 1
        (verda_create,) = await sim.creates("verda")
        assert verda_create["startup_script"] == SCRIPT
