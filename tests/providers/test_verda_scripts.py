"""The Verda adapter's startup scripts against the simulator: made for a create and named in
it, made again only when no script of that name and text exists, deleted by name; a quota
that is full is `Unavailable` (nothing sent: the order waits), never a refusal of the order."""

import ssl
from collections.abc import AsyncIterator
from decimal import Decimal

import httpx
import pytest
from pydantic import SecretStr

from app.core.catalogue import Provider
from app.providers.base import Offer, Rejected, Unavailable
from app.providers.verda import VerdaAdapter
from app.simulators.control import SimControlSync
from app.simulators.verda import VerdaSimulator
from app.simulators.verda.keys import SCRIPT_LIMIT
from tests.fixtures.simulators import ServedSimulators

NAME = "ap-01jd3xq8w1-1"
TAG = "ap-order-01jd3xq8w1"
SCRIPT = "#!/bin/sh\necho 'prêt' > /tmp/ready\n"
B300 = Offer(Provider("verda"), "FIN-03", "8B300.240V", "B300", 8, Decimal("45.52"))
TLS = ssl.create_default_context()

pytestmark = pytest.mark.usefixtures("sim_sync")


@pytest.fixture(scope="module")
def sim(served_simulators: ServedSimulators) -> VerdaSimulator:
    simulator = served_simulators.simulators["verda"]
    assert isinstance(simulator, VerdaSimulator)
    return simulator


@pytest.fixture
async def adapter(verda_url: str) -> AsyncIterator[VerdaAdapter]:
    async with httpx.AsyncClient(verify=TLS) as http:
        yield VerdaAdapter(
            http,
            base_url=f"{verda_url}/v1",
            client_id=SecretStr("sim-client"),
            client_secret=SecretStr("sim-secret"),
            image="ubuntu-24.04-cuda-12.8-open-docker",
        )


def stocked(sim_sync: SimControlSync) -> None:
    sim_sync.stock("verda", B300.sku, B300.region, 1)


async def test_a_create_makes_a_script_named_after_the_vm_and_names_it(
    adapter: VerdaAdapter, sim: VerdaSimulator, sim_sync: SimControlSync
) -> None:
    stocked(sim_sync)
    vm = await adapter.create_vm(
        B300, name=NAME, tag=TAG, ssh_public_key=None, startup_script=SCRIPT
    )
    (script,) = sim.startup_scripts.values()
    assert (script["name"], script["script"]) == (NAME, SCRIPT)
    assert sim.vms[vm.id].details["startup_script_id"] == script["id"]
    assert await adapter.list_startup_scripts() == [NAME]
    await adapter.delete_startup_script(NAME)
    assert sim.startup_scripts == {}
    await adapter.delete_startup_script(NAME)  # gone already, or never made: fine


async def test_a_create_without_a_script_makes_none(
    adapter: VerdaAdapter, sim: VerdaSimulator, sim_sync: SimControlSync
) -> None:
    stocked(sim_sync)
    vm = await adapter.create_vm(B300, name=NAME, tag=TAG, ssh_public_key=None)
    assert (sim.startup_scripts, sim.vms[vm.id].details["startup_script_id"]) == ({}, None)


async def test_a_full_quota_is_unavailable_and_nothing_is_created(
    adapter: VerdaAdapter, sim: VerdaSimulator, sim_sync: SimControlSync
) -> None:
    stocked(sim_sync)
    for n in range(SCRIPT_LIMIT):
        sim.add_startup_script(f"someone-{n}", "echo theirs")
    with pytest.raises(Unavailable) as refused:
        await adapter.create_vm(
            B300, name=NAME, tag=TAG, ssh_public_key=None, startup_script=SCRIPT
        )
    assert not isinstance(refused.value, Rejected) and "startup script refused" in str(
        refused.value
    )
    assert sim.creates == [] and sim.vms == {}
    # Positive control: with room again, the same create goes through.
    sim.startup_scripts.pop(next(iter(sim.startup_scripts)))
    await adapter.create_vm(B300, name=NAME, tag=TAG, ssh_public_key=None, startup_script=SCRIPT)
    assert [c.outcome for c in sim.creates] == ["created"]


async def test_a_script_this_name_already_has_is_used_again_when_no_other_can_be_made(
    adapter: VerdaAdapter, sim: VerdaSimulator, sim_sync: SimControlSync
) -> None:
    stocked(sim_sync)
    earlier = sim.add_startup_script(NAME, SCRIPT)  # made by a try that stopped short
    for n in range(SCRIPT_LIMIT - 1):
        sim.add_startup_script(f"someone-{n}", "echo theirs")
    vm = await adapter.create_vm(
        B300, name=NAME, tag=TAG, ssh_public_key=None, startup_script=SCRIPT
    )
    assert sim.vms[vm.id].details["startup_script_id"] == earlier["id"]
    assert sim.creates[0].startup_script == SCRIPT


async def test_every_page_of_scripts_is_read(adapter: VerdaAdapter, verda_url: str) -> None:
    """`GET /scripts` answers 10 a page by default, newest first: past the first page, a
    leaked script was never seen, and past the quota of 100 every script order waited."""
    names = [f"ap-01jd3xq8w1-{n}" for n in range(1, 131)]
    async with httpx.AsyncClient(base_url=verda_url, verify=TLS) as control:
        for name in names:
            made = await control.post(
                "/_sim/startup-scripts", json={"name": name, "script": SCRIPT}
            )
            assert made.status_code == 201
    assert sorted(await adapter.list_startup_scripts()) == sorted(names)
