"""The Verda adapter against the simulated Verda on a real socket, one fault kind at a time."""

import asyncio
import contextlib
import json
import ssl
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY
from pydantic import SecretStr

from app.core.catalogue import Interconnect, Provider
from app.providers.base import (
    VM,
    AuthFailed,
    MachineKey,
    NoCapacity,
    Offer,
    OutcomeUnknown,
    ProviderAdapter,
    ProviderOutOfFunds,
    RateLimited,
    Refused,
    Rejected,
    Unavailable,
    VMState,
)
from app.providers.headroom import parse_rate_limit
from app.providers.http import Connections
from app.providers.verda import VerdaAdapter
from app.providers.verda.client import DeleteRefused
from app.providers.verda.parse import gpu_model
from app.simulators.control import SimControlSync
from app.simulators.verda import VerdaSimulator
from tests.clock import TICK, FakeClock
from tests.fixtures.simulators import ServedSimulators
from tests.waiting import eventually, vm_reaches

IMAGE = "ubuntu-24.04-cuda-12.8-open-docker"
NAME = "ap-01jd3xq8w1-1"
TAG = "ap-order-01jd3xq8w1"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGF1dG9wcm92aXNpb24tdGVzdA me@laptop"
TIMEOUT = 0.5  # for the adapters that are to time out
PATIENT = 10.0  # for the others: a bound for a hang, which a loaded machine must not reach
B300 = ("8B300.240V", "FIN-03")
TLS = ssl.create_default_context()  # built once: each client building its own costs ~30 ms


# The simulators are reset before each test, with quick boots.
pytestmark = pytest.mark.usefixtures("sim_sync")


@pytest.fixture(scope="module")
def sim(served_simulators: ServedSimulators) -> VerdaSimulator:
    """The served Verda simulator itself (its tokens, keys and requests)."""
    simulator = served_simulators.simulators["verda"]
    assert isinstance(simulator, VerdaSimulator)
    return simulator


@pytest.fixture
async def control(verda_url: str, sim_sync: SimControlSync) -> AsyncIterator[httpx.AsyncClient]:
    """The simulator's control API (`/_sim`), every simulator reset first (before a class's
    autouse fixture sets it up)."""
    async with httpx.AsyncClient(base_url=verda_url, verify=TLS) as client:
        yield client


@pytest.fixture
async def sent() -> list[httpx.Request]:
    return []


@pytest.fixture
async def http(sent: list[httpx.Request]) -> AsyncIterator[httpx.AsyncClient]:
    async def record(request: httpx.Request) -> None:
        sent.append(request)

    async with httpx.AsyncClient(event_hooks={"request": [record]}, verify=TLS) as client:
        yield client


async def fetches_started(fetches: list[httpx.Request], count: int) -> bool:
    """Whether `count` token requests have been started (held or not)."""
    return len(fetches) >= count


def make_adapter(
    http: Connections,
    verda_url: str,
    *,
    secret: str = "sim-secret",
    image: str = IMAGE,
    clock: Callable[[], float] = time.monotonic,
    timeout: float = PATIENT,
) -> VerdaAdapter:
    return VerdaAdapter(
        http,
        base_url=f"{verda_url}/v1",
        client_id=SecretStr("sim-client"),
        client_secret=SecretStr(secret),
        image=image,
        timeout=timeout,
        create_timeout=timeout,
        clock=clock,
    )


@pytest.fixture
async def adapter(http: httpx.AsyncClient, verda_url: str) -> VerdaAdapter:
    return make_adapter(http, verda_url)


@pytest.fixture
async def impatient(http: httpx.AsyncClient, verda_url: str) -> VerdaAdapter:
    """An adapter whose calls time out after `TIMEOUT`, for the tests of timeouts."""
    return make_adapter(http, verda_url, timeout=TIMEOUT)


async def stock(control: httpx.AsyncClient, sku: str, region: str, quantity: int) -> None:
    body = {"sku": sku, "region": region, "quantity": quantity}
    assert (await control.put("/_sim/stock", json=body)).status_code == 200


async def fault(control: httpx.AsyncClient, kind: str, **extra: Any) -> None:
    assert (await control.post("/_sim/faults", json={"kind": kind, **extra})).status_code == 201


def offer_for(sku: str, region: str, **overrides: Any) -> Offer:
    fields: dict[str, Any] = {
        "provider": Provider("verda"),
        "region": region,
        "sku": sku,
        "gpu_model": "B300",
        "gpu_count": 8,
        "price_per_hour": Decimal("45.52"),
    }
    return Offer(**(fields | overrides))


async def create(adapter: VerdaAdapter, name: str = NAME, ssh: str | None = None) -> VM:
    return await adapter.create_vm(offer_for(*B300), name=name, tag=TAG, ssh_public_key=ssh)


async def found_by_name(adapter: VerdaAdapter) -> list[VM]:
    return await adapter.find_vms(
        name=NAME, tag=TAG, offer=offer_for(*B300), not_before=datetime.now(UTC)
    )


async def wait_until_found(adapter: VerdaAdapter) -> list[VM]:
    found: list[VM] = []

    async def check() -> bool:
        found[:] = await found_by_name(adapter)
        return bool(found)

    await eventually(check)
    return found


def test_the_adapter_is_a_provider_adapter(adapter: VerdaAdapter) -> None:
    typed: ProviderAdapter = adapter
    assert typed.provider is Provider("verda")


class TestOffers:
    async def test_offers_are_normalized_from_types_and_availability(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        for sku, region in (B300, ("1A100.40S.22V", "FIN-01"), ("1V100.6V", "FIN-01"),
                            ("2A6000.20V", "FIN-01"), ("8A100.176V", "FIN-02")):  # fmt: skip
            await stock(control, sku, region, 2)
        offers = {o.sku: o for o in await adapter.fetch_offers()}
        assert offers["8B300.240V"] == Offer(
            provider=Provider("verda"),
            region="FIN-03",
            sku="8B300.240V",
            gpu_model="B300",
            gpu_count=8,
            price_per_hour=Decimal("45.52"),
            interconnect=Interconnect.SXM,
            vcpus=240,
            ram_gb=2200,
            disk_gb=None,
            disk_fixed=False,
            disk_price_per_gb_hour=Decimal("0.2") / 730,  # the NVMe price per GB-month
            available=None,
        )
        assert offers["1V100.6V"].disk_price_per_gb_hour == 0  # its disk comes with the type
        assert (offers["8A100.176V"].gpu_model, offers["8A100.176V"].interconnect) == (
            "A100-80G",
            Interconnect.SXM,
        )
        assert offers["1A100.40S.22V"].gpu_model == "A100-40G"
        assert (offers["2A6000.20V"].gpu_model, offers["2A6000.20V"].interconnect) == (
            "RTX-A6000",
            Interconnect.PCIE,
        )
        assert (offers["1V100.6V"].disk_gb, offers["1V100.6V"].disk_fixed) == (225, True)
        assert offers["2A6000.20V"].price_per_hour == Decimal("1.58")
        assert set(offers) == {"8B300.240V", "1A100.40S.22V", "1V100.6V", "2A6000.20V",
                               "8A100.176V"}  # fmt: skip

    async def test_no_stock_no_offers_and_cpu_nodes_are_left_out(
        self, adapter: VerdaAdapter
    ) -> None:
        assert await adapter.fetch_offers() == []

    async def test_prices_are_cached_stock_is_read_every_time(
        self, adapter: VerdaAdapter, sent: list[httpx.Request]
    ) -> None:
        await adapter.fetch_offers()
        await adapter.fetch_offers()
        paths = [r.url.path for r in sent]
        assert paths.count("/verda/v1/instance-types") == 1
        assert paths.count("/verda/v1/volume-types") == 1
        assert paths.count("/verda/v1/instance-availability") == 2
        availability = next(r for r in sent if r.url.path.endswith("/instance-availability"))
        assert availability.url.params["is_spot"] == "false"
        await adapter.refresh_prices()
        assert [r.url.path for r in sent].count("/verda/v1/instance-types") == 2

    def test_verda_model_names_map_to_the_catalogue(self) -> None:
        assert gpu_model("RTX PRO 6000", None, 8, 768) == "RTX-PRO-6000"
        assert gpu_model("Tesla V100", None, 1, 16) == "V100"
        assert gpu_model("A100", None, 2, 160) == "A100-80G"
        assert gpu_model("H100 NEW NAME", "8x H100 SXM5 80GB", 8, 640) == "H100"
        assert gpu_model("CPU Node", "", 0, 0) is None
        assert gpu_model("Voodoo 5", "1x Voodoo 5 6000 64MB", 1, 0) is None


class TestStockReads:
    """With waiting orders' machines, a read is the full list or one wanted type's."""

    H100 = ("1H100.80S.30V", "FIN-01")
    WANTED = frozenset({MachineKey("H100", 1), MachineKey("B300", 8)})

    @staticmethod
    def availability_paths(sent: list[httpx.Request]) -> list[str]:
        """The instance stock reads sent (a full read reads the clusters' too: not these)."""
        return [
            r.url.path.removeprefix("/verda/v1")
            for r in sent
            if "/instance-availability" in r.url.path
        ]

    async def test_a_type_in_stock_somewhere_is_then_found_by_the_full_list(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient, sent: list[httpx.Request]
    ) -> None:
        assert await adapter.fetch_offers(self.WANTED) == []  # the full list goes first
        await stock(control, *self.H100, 1)
        first = await adapter.fetch_offers(self.WANTED)  # a type's turn: B300's, then H100's
        second = await adapter.fetch_offers(self.WANTED)
        assert self.availability_paths(sent) == [
            "/instance-availability",
            "/instance-availability/8B300.240V",
            "/instance-availability/1H100.80S.30V",
            "/instance-availability",  # H100 said true: where is it?
        ]
        assert first == []  # B300 is not in stock, and nothing else was read again
        assert [(o.sku, o.region) for o in second] == [self.H100]

    async def test_a_type_known_to_be_in_stock_needs_no_full_read_to_find_it(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient, sent: list[httpx.Request]
    ) -> None:
        await stock(control, *self.H100, 1)
        assert [o.sku for o in await adapter.fetch_offers(self.WANTED)] == ["1H100.80S.30V"]
        await adapter.fetch_offers(self.WANTED)  # B300's turn: false
        still = await adapter.fetch_offers(self.WANTED)  # H100's turn: true, and known where
        assert self.availability_paths(sent) == [
            "/instance-availability",
            "/instance-availability/8B300.240V",
            "/instance-availability/1H100.80S.30V",
        ]
        assert [(o.sku, o.region) for o in still] == [self.H100]

    async def test_a_type_gone_everywhere_is_taken_out_without_a_full_read(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient, sent: list[httpx.Request]
    ) -> None:
        await stock(control, *self.H100, 1)
        await stock(control, *B300, 1)
        both = await adapter.fetch_offers(self.WANTED)
        assert {o.sku for o in both} == {"1H100.80S.30V", "8B300.240V"}
        await stock(control, *B300, 0)
        after = await adapter.fetch_offers(self.WANTED)  # B300's turn: false
        assert self.availability_paths(sent)[-1] == "/instance-availability/8B300.240V"
        assert [o.sku for o in after] == ["1H100.80S.30V"]  # as the full list last found it
        # The control: without wanted machines every read is the full list.
        assert [o.sku for o in await adapter.fetch_offers()] == ["1H100.80S.30V"]
        assert self.availability_paths(sent)[-1] == "/instance-availability"

    async def test_a_unit_a_create_took_is_not_offered_again_by_another_types_read(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient, sent: list[httpx.Request]
    ) -> None:
        await stock(control, *B300, 2)
        found = await adapter.fetch_offers(self.WANTED)  # the full list
        # The control: with no create since, B300's own read repeats where the list found it.
        again = await adapter.fetch_offers(self.WANTED)
        assert self.availability_paths(sent)[-1] == "/instance-availability/8B300.240V"
        assert [(o.sku, o.region) for o in found] == [(o.sku, o.region) for o in again] == [B300]
        await create(adapter)  # one of the two units
        # H100's turn: it says nothing of B300, whose unit the create may have taken, so B300
        # is not offered until a full list read after the create finds it (a second create
        # would otherwise go to the unit the first one took).
        after_create = await adapter.fetch_offers(self.WANTED)
        assert self.availability_paths(sent)[-1] == "/instance-availability/1H100.80S.30V"
        assert after_create == []
        read_anew = await adapter.fetch_offers(self.WANTED)
        assert self.availability_paths(sent)[-1] == "/instance-availability"
        assert [(o.sku, o.region) for o in read_anew] == [B300]  # the unit left


class TestVMs:
    async def test_create_get_find_delete(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, *B300, 1)
        vm = await create(adapter)
        assert (vm.provider, vm.state, vm.name, vm.region, vm.sku, vm.tags) == (
            Provider("verda"), VMState.PENDING, NAME, "FIN-03", "8B300.240V", (TAG,),
        )  # fmt: skip
        creates = (await control.get("/_sim/creates")).json()
        assert [(c["name"], c["outcome"], c["vm_id"]) for c in creates] == [
            (NAME, "created", vm.id)
        ]
        running = await vm_reaches(adapter, vm.id, VMState.RUNNING)
        assert running.ip is not None and running.provider_status == "running"
        assert running.created_at is not None and running.tags == (TAG,)
        assert [v.id for v in await found_by_name(adapter)] == [vm.id]
        await adapter.delete_vm(vm.id)
        gone = await adapter.get_vm(vm.id)
        assert gone is not None and gone.state in (VMState.DELETING, VMState.GONE)
        await adapter.delete_vm(vm.id)
        await vm_reaches(adapter, vm.id, VMState.GONE)
        await adapter.delete_vm(vm.id)
        assert await found_by_name(adapter) == []

    async def test_find_vms_matches_tag_and_hostname_exactly(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, *B300, 3)
        mine = await create(adapter)
        await create(adapter, name=f"{NAME}0")
        await adapter.create_vm(offer_for(*B300), name=NAME, tag=f"{TAG}0", ssh_public_key=None)
        assert [v.id for v in await found_by_name(adapter)] == [mine.id]

    async def test_an_ssh_key_is_registered_once_and_passed_by_id(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient, sim: VerdaSimulator
    ) -> None:
        await stock(control, *B300, 2)
        first = await create(adapter, ssh=SSH_KEY)
        second = await create(adapter, name=f"{NAME}x", ssh=SSH_KEY.replace("me@laptop", "x"))
        assert len(sim.ssh_keys) == 1
        key_id = next(iter(sim.ssh_keys))
        assert sim.vms[first.id].details["ssh_key_ids"] == [key_id]
        assert sim.vms[second.id].details["ssh_key_ids"] == [key_id]

    async def test_a_disk_size_is_sent_as_the_os_volume(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, *B300, 1)
        vm = await adapter.create_vm(
            offer_for(*B300), name=NAME, tag=TAG, ssh_public_key=None, disk_gb=2000
        )
        (shown,) = (await control.get("/_sim/vms")).json()
        assert (shown["id"], shown["os_volume_size"]) == (vm.id, 2000)

    async def test_unknown_ids_are_none_and_deleting_them_is_fine(
        self, adapter: VerdaAdapter
    ) -> None:
        assert await adapter.get_vm("6f1c1f1e-4d7a-4b0e-9d43-0c1a2b3c4d5e") is None
        assert await adapter.get_vm("../../balance") is None
        await adapter.delete_vm("6f1c1f1e-4d7a-4b0e-9d43-0c1a2b3c4d5e")

    async def test_a_delete_while_provisioning_is_retry_later(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await control.put("/_sim/config", json={"boot_seconds": 30})
        await stock(control, *B300, 1)
        vm = await create(adapter)
        with pytest.raises(Unavailable, match="delete later"):
            await adapter.delete_vm(vm.id)

    async def test_a_delete_names_every_volume_so_nothing_goes_to_the_trash(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient, sent: list[httpx.Request]
    ) -> None:
        """Without `volume_ids` Verda moves the OS volume to its 96-hour trash, billing and
        counting against the quota, and `delete_permanently` does nothing."""
        await control.put("/_sim/config", json={"boot_seconds": 0})
        await stock(control, *B300, 1)
        vm = await create(adapter)
        await adapter.delete_vm(vm.id)
        (delete,) = [r for r in sent if (r.method, r.url.path) == ("PUT", "/verda/v1/instances")]
        (volume,) = (await control.get("/_sim/volumes")).json()
        assert json.loads(delete.content) == {
            "action": "delete",
            "id": [vm.id],
            "delete_permanently": True,
            "volume_ids": [volume["id"]],
        }
        assert (volume["status"], volume["hourly_price"]) == ("deleted", "0")
        assert volume["name"] == f"{NAME}-os" and volume["tags"] == [f"autoprovision={TAG}"]

    async def test_a_forbidden_action_refusal_is_a_refusal_and_the_vm_is_read_again(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        """Verda refuses deletes with `forbidden_action` (403): never bad credentials."""
        await control.put("/_sim/config", json={"boot_seconds": 0})
        await stock(control, *B300, 1)
        vm = await create(adapter)
        client = adapter._api
        await client.delete_instance(vm.id, [])
        await vm_reaches(adapter, vm.id, VMState.GONE)
        with pytest.raises(DeleteRefused) as refused:  # "Can't discontinue a discontinued ..."
            await client.delete_instance(vm.id, [])
        assert refused.value.status_code == 403
        await adapter.delete_vm(vm.id)  # read first: gone, nothing to send

    async def test_our_volumes_left_behind_are_listed_and_deleted_for_good(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await control.put("/_sim/config", json={"boot_seconds": 0})
        await stock(control, *B300, 2)
        kept, trashed = await create(adapter), await create(adapter, name=f"{NAME}0")
        client = adapter._api
        keep = {"action": "delete", "id": [kept.id], "volume_ids": []}
        assert (await client.request("PUT", "/instances", json=keep)).status_code == 202
        await client.delete_instance(trashed.id, [])  # no volume_ids: into the trash
        listed = {v.owner: v for v in await adapter.list_volumes()}
        assert {o: v.status for o, v in listed.items()} == {NAME: "detached", f"{NAME}0": "trash"}
        for volume in listed.values():
            await adapter.delete_volume(volume.id)
        assert await adapter.list_volumes() == []
        statuses = {v["status"] for v in (await control.get("/_sim/volumes")).json()}
        assert statuses == {"deleted"}

    async def test_balance_is_a_decimal(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await control.put("/_sim/config", json={"balance": "1234.56"})
        assert await adapter.balance() == Decimal("1234.56")


class TestReadFaults:
    @pytest.mark.parametrize("kind", ["http_500", "malformed_json"])
    async def test_a_broken_read_is_unavailable(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient, kind: str
    ) -> None:
        await adapter.fetch_offers()
        for read in (adapter.fetch_offers, adapter.balance):
            await fault(control, kind)
            with pytest.raises(Unavailable):
                await read()
        assert await adapter.fetch_offers() == []

    async def test_a_read_that_times_out_is_unavailable(
        self, impatient: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await impatient.fetch_offers()
        await fault(control, "timeout", seconds=TIMEOUT + 0.3)
        with pytest.raises(Unavailable, match="timed out"):
            await impatient.fetch_offers()

    async def test_429_is_rate_limited_with_retry_after(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await adapter.balance()
        await fault(control, "http_429", seconds=7)
        with pytest.raises(RateLimited) as caught:
            await adapter.fetch_offers()
        assert caught.value.retry_after == 7

    async def test_a_used_up_limit_is_held_back_instead_of_asking_for_a_429(
        self, adapter: VerdaAdapter, verda_url: str, sim: VerdaSimulator
    ) -> None:
        for _ in range(60):  # Verda's limit for one method and path: 60 a minute
            await adapter.balance()
        sent = [r for r in sim.requests if (r.method, r.path) == ("GET", "/v1/balance")]
        assert len(sent) == 60
        with pytest.raises(RateLimited) as caught:
            await adapter.balance()
        assert caught.value.retry_after is not None and 50 <= caught.value.retry_after <= 60
        assert caught.value.status_code is None  # not an answer: nothing was sent
        assert [r for r in sim.requests if (r.method, r.path) == ("GET", "/v1/balance")] == sent
        # The control: the same request sent anyway is Verda's 429.
        token = await adapter._api.token()
        async with httpx.AsyncClient(verify=TLS) as raw:
            answer = await raw.get(
                f"{verda_url}/v1/balance", headers={"Authorization": f"Bearer {token}"}
            )
        assert answer.status_code == 429

    async def test_answers_report_what_is_left(self, adapter: VerdaAdapter, verda_url: str) -> None:
        await adapter.balance()
        token = await adapter._api.token()
        async with httpx.AsyncClient(verify=TLS) as raw:
            answer = await raw.get(
                f"{verda_url}/v1/balance", headers={"Authorization": f"Bearer {token}"}
            )
        assert answer.headers["RateLimit-Policy"] == '"project";q=500;w=60, "endpoint";q=60;w=60'
        assert parse_rate_limit(answer.headers["RateLimit"]).keys() == {"project", "endpoint"}
        assert parse_rate_limit(answer.headers["RateLimit"])["endpoint"][0] == 58
        left = REGISTRY.get_sample_value(
            "autoprovision_provider_rate_limit_remaining",
            {"provider": "verda", "bucket": "project"},
        )
        assert left == 499  # the adapter's one request so far, as Verda reported it

    async def test_an_unknown_status_is_unknown(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, *B300, 1)
        vm = await create(adapter)
        await fault(control, "unknown_status")
        odd = await adapter.get_vm(vm.id)
        assert odd is not None and odd.state is VMState.UNKNOWN
        assert odd.provider_status not in ("ordered", "provisioning", "running")


class TestCreateOutcomes:
    @pytest.fixture(autouse=True)
    async def warm(
        self, adapter: VerdaAdapter, impatient: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        """A token first, so a request fault hits the create and not the token call."""
        await stock(control, *B300, 1)
        await adapter.balance()
        await impatient.balance()

    @pytest.mark.parametrize("kind", ["http_500", "malformed_json"])
    async def test_a_broken_answer_to_a_create_is_outcome_unknown(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient, kind: str
    ) -> None:
        await fault(control, kind)
        with pytest.raises(OutcomeUnknown):
            await create(adapter)

    async def test_a_create_that_times_out_is_outcome_unknown_and_found_later(
        self, impatient: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await fault(control, "timeout", seconds=TIMEOUT + 0.3)
        with pytest.raises(OutcomeUnknown):
            await create(impatient)
        found = await wait_until_found(impatient)
        assert [(v.name, v.tags) for v in found] == [(NAME, (TAG,))]

    async def test_a_short_create_delay_still_succeeds(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await fault(control, "create_delay", seconds=0.1)
        vm = await create(adapter)
        assert [v.id for v in await found_by_name(adapter)] == [vm.id]

    async def test_a_long_create_delay_is_outcome_unknown_and_found_later(
        self, impatient: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await fault(control, "create_delay", seconds=TIMEOUT + 0.3)
        with pytest.raises(OutcomeUnknown):
            await create(impatient)
        assert len(await wait_until_found(impatient)) == 1

    async def test_an_error_after_commit_is_outcome_unknown_and_finds_exactly_that_vm(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await fault(control, "create_error_after_commit")
        with pytest.raises(OutcomeUnknown):
            await create(adapter)
        made = [c["vm_id"] for c in (await control.get("/_sim/creates")).json()]
        assert [v.id for v in await found_by_name(adapter)] == made

    async def test_a_capacity_race_is_no_capacity(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await fault(control, "capacity_race")
        with pytest.raises(NoCapacity):
            await create(adapter)
        assert (await control.get("/_sim/vms")).json() == []

    async def test_zero_stock_is_no_capacity(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, *B300, 0)
        with pytest.raises(NoCapacity) as caught:
            await create(adapter)
        assert caught.value.status_code == 503

    async def test_a_low_balance_is_insufficient_funds(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await control.put("/_sim/config", json={"balance": "1"})
        with pytest.raises(ProviderOutOfFunds):
            await create(adapter)

    async def test_429_on_a_create_is_rate_limited(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await fault(control, "http_429", seconds=3)
        with pytest.raises(RateLimited) as caught:
            await create(adapter)
        assert caught.value.retry_after == 3

    async def test_fail_after_accept_creates_then_fails(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await fault(control, "fail_after_accept")
        vm = await create(adapter)
        failed = await vm_reaches(adapter, vm.id, VMState.FAILED)
        assert failed.provider_status == "error"
        await adapter.delete_vm(vm.id)

    async def test_a_wrong_request_is_rejected(
        self, http: httpx.AsyncClient, verda_url: str, adapter: VerdaAdapter
    ) -> None:
        with pytest.raises(Rejected) as caught:  # "Invalid image": our field `image`
            await make_adapter(http, verda_url, image="no-such-image").create_vm(
                offer_for(*B300), name=NAME, tag=TAG, ssh_public_key=None
            )
        assert caught.value.status_code == 400

    async def test_an_instance_type_verda_does_not_know_is_refused_not_rejected(
        self, adapter: VerdaAdapter
    ) -> None:
        """ "Invalid instance type" names no field as our body spells it (`instance_type`):
        the type came from Verda's own listing, so that offer cools down instead."""
        with pytest.raises(Refused) as caught:
            await adapter.create_vm(
                offer_for("9Z999.1V", "FIN-03"), name=NAME, tag=TAG, ssh_public_key=None
            )
        assert (caught.value.status_code, caught.value.reason) == (400, "invalid_request")
        assert caught.value.said == "Invalid instance type"

    @pytest.mark.parametrize(
        ("status", "reason"),
        [
            (400, "invalid_request"),  # the spec's input error, which quota refusals share
            (403, "forbidden_action"),  # the spec's "Can't perform the current action"
            (404, "not_found"),
            (409, "conflict"),
            (422, None),
        ],
    )
    async def test_a_refusal_verda_does_not_explain_is_refused_with_what_it_said(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient, status: int, reason: str | None
    ) -> None:
        message = "GPU_QUOTA_EXCEEDED: limit exceeded for this project"
        await fault(control, "create_refused", status=status, reason=reason, message=message)
        with pytest.raises(Refused) as caught:
            await create(adapter)
        refused = caught.value
        assert (refused.status_code, refused.reason, refused.said) == (status, reason, message)

    async def test_a_refusal_naming_a_field_we_sent_is_rejected(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        """The control: an input error naming our `location_code` fails the order."""
        message = "location_code FIN-03 does not sell this image"
        await fault(control, "create_refused", reason="invalid_request", message=message)
        with pytest.raises(Rejected) as caught:
            await create(adapter)
        assert caught.value.status_code == 400 and "location_code" in str(caught.value)


class TestAuth:
    async def test_wrong_credentials_are_auth_failed_and_never_shown(
        self, http: httpx.AsyncClient, verda_url: str, control: httpx.AsyncClient
    ) -> None:
        await stock(control, *B300, 1)
        wrong = make_adapter(http, verda_url, secret="hunter2-very-secret")
        with pytest.raises(AuthFailed) as on_read:
            await wrong.fetch_offers()
        with pytest.raises(AuthFailed) as on_create:
            await create(wrong)
        for text in (repr(wrong), str(on_read.value), str(on_create.value)):
            assert "hunter2" not in text and "sim-client" not in text
        assert (await control.get("/_sim/creates")).json() == []

    async def test_a_token_is_reused_while_it_has_more_than_a_minute_left(
        self, adapter: VerdaAdapter, sim: VerdaSimulator
    ) -> None:
        await adapter.balance()
        await adapter.balance()
        assert sim.grants == ["client_credentials"]

    async def test_past_its_refresh_point_a_token_is_replaced_off_the_requests_path(
        self, verda_url: str, control: httpx.AsyncClient, sim: VerdaSimulator
    ) -> None:
        # Token fetches wait at a gate the test opens; the adapter's clock moves by hand.
        gate, fetches = asyncio.Event(), []

        async def held(request: httpx.Request) -> None:
            if request.url.path.endswith("/oauth2/token"):
                fetches.append(request)
                await gate.wait()

        async def granted(*grants: str) -> bool:
            return sim.grants == list(grants)

        clock = FakeClock()
        async with httpx.AsyncClient(event_hooks={"request": [held]}, verify=TLS) as http:
            adapter = make_adapter(http, verda_url, clock=clock)
            gate.set()
            await adapter.balance()
            assert sim.grants == ["client_credentials"]

            gate.clear()
            clock.advance(3600 - 60 + TICK)  # a minute before expiry: time for a new one
            await stock(control, *B300, 1)
            vm = await create(adapter)  # sent with the current token while the new one is held
            assert [c["vm_id"] for c in (await control.get("/_sim/creates")).json()] == [vm.id]
            await eventually(lambda: fetches_started(fetches, 2))  # the new one, held at the gate
            assert sim.grants == ["client_credentials"]
            gate.set()
            await eventually(lambda: granted("client_credentials", "refresh_token"))

            # The control: past expiry there is no usable token, and a request waits for one.
            gate.clear()
            clock.advance(3600)
            waiting = asyncio.create_task(adapter.balance())
            await eventually(lambda: fetches_started(fetches, 3))
            assert not waiting.done()
            gate.set()
            await waiting
            assert sim.grants == ["client_credentials", "refresh_token", "refresh_token"]

    async def test_a_401_gets_a_new_token_and_one_more_try_even_for_a_create(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient, sim: VerdaSimulator
    ) -> None:
        await adapter.balance()
        await control.post("/_sim/reset")  # the simulator forgets every token it issued
        await stock(control, *B300, 1)
        vm = await create(adapter)
        assert sim.grants == ["client_credentials"]
        creates = (await control.get("/_sim/creates")).json()
        assert [(c["outcome"], c["vm_id"]) for c in creates] == [("created", vm.id)]


def opened_by(request: str) -> float:
    """Connections the Verda adapter has opened so far, by creates or by other requests."""
    value = REGISTRY.get_sample_value(
        "autoprovision_provider_connections_opened_total",
        {"provider": "verda", "request": request},
    )
    return value or 0.0


class TestConnections:
    async def test_a_create_after_a_stock_read_opens_no_connection_and_fetches_no_token(
        self, verda_url: str, control: httpx.AsyncClient, sim: VerdaSimulator
    ) -> None:
        await stock(control, *B300, 3)
        async with httpx.AsyncClient(verify=TLS) as http:
            adapter = make_adapter(http, verda_url)
            await adapter.fetch_offers()  # a token, then the read: the connection is warm
            before, grants = opened_by("create"), list(sim.grants)
            await create(adapter)
            assert opened_by("create") == before
            assert sim.grants == grants
            # The control: two creates at once find one warm connection, and one opens another.
            await adapter.fetch_offers()
            await asyncio.gather(create(adapter, name=NAME + "a"), create(adapter, name=NAME + "b"))
            assert opened_by("create") == before + 1

    async def test_creates_sent_at_once_each_find_a_warm_connection_in_lanes(
        self, verda_url: str, control: httpx.AsyncClient
    ) -> None:
        await stock(control, *B300, 3)
        async with contextlib.AsyncExitStack() as stack:
            lanes = [await stack.enter_async_context(httpx.AsyncClient(verify=TLS)) for _ in "abc"]
            adapter = make_adapter(lanes, verda_url)
            for _ in lanes:  # reads take the lanes in turn: each keeps a connection open
                await adapter.fetch_offers()
            before = opened_by("create")
            await asyncio.gather(create(adapter, name=NAME + "a"), create(adapter, name=NAME + "b"))
            assert opened_by("create") == before  # the control, one client, is the test above
