"""The Verda adapter's Instant Clusters (offers, stock reads, create, follow, find, list, delete)
against the simulated Verda on a real socket, behind the same `ProviderAdapter` methods as its
instances."""

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.core.catalogue import ClusterInterconnect, Interconnect
from app.core.market import DEFAULT_DISK_GB
from app.providers.base import VM, MachineKey, NoCapacity, Offer, Unavailable, VMState
from app.providers.verda import VerdaAdapter, limits
from app.providers.verda.client import VerdaClient
from app.providers.verda.clusters import VerdaClusters
from app.simulators.control import SimControlSync
from tests.clock import FakeClock
from tests.waiting import eventually

CLUSTER = ("16B200", "FIN-01")
INSTANCE = ("8B200.240V", "FIN-01")  # one node of the same model: a machine of its own
CLUSTER_MACHINE = MachineKey("B200", 8, 2)
INSTANCE_MACHINE = MachineKey("B200", 8)
NAME = "ap-01jd3xq8w1-1"
TAG = "ap-order-01jd3xq8w1"
MISSING = "6b0e3c52-6a43-4c36-9d61-2f1f0a3b7c11"
# The simulator's shared-volume type (`NVMe_Shared_Cluster`) price per GB-month, per hour.
SHARED_PER_GB_HOUR = Decimal("0.3") / 730
PATIENT = 10.0  # a bound for a hang, which a loaded machine must not reach

# The simulators are reset before each test, with quick boots.
pytestmark = pytest.mark.usefixtures("sim_sync")


@pytest.fixture
async def control(verda_url: str, sim_sync: SimControlSync) -> AsyncIterator[httpx.AsyncClient]:
    """The simulated Verda's control API (`/_sim`), every simulator reset first."""
    async with httpx.AsyncClient(base_url=verda_url) as client:
        yield client


@pytest.fixture
def sent() -> list[httpx.Request]:
    return []


@pytest.fixture
async def adapter(verda_url: str, sent: list[httpx.Request]) -> AsyncIterator[VerdaAdapter]:
    async def record(request: httpx.Request) -> None:
        sent.append(request)

    async with httpx.AsyncClient(event_hooks={"request": [record]}) as http:
        yield VerdaAdapter(
            http,
            base_url=f"{verda_url}/v1",
            client_id=SecretStr("sim-client"),
            client_secret=SecretStr("sim-secret"),
            image="ubuntu-24.04-cuda-12.8-open-docker",
            timeout=PATIENT,
            create_timeout=PATIENT,
        )


async def stock(control: httpx.AsyncClient, sku: str, region: str, quantity: int) -> None:
    body = {"sku": sku, "region": region, "quantity": quantity}
    assert (await control.put("/_sim/stock", json=body)).status_code == 200


async def fault(control: httpx.AsyncClient, kind: str, **extra: Any) -> None:
    assert (await control.post("/_sim/faults", json={"kind": kind, **extra})).status_code == 201


def stock_paths(sent: list[httpx.Request]) -> list[str]:
    """The stock reads sent, instances' and clusters', in order."""
    return [r.url.path.removeprefix("/verda/v1") for r in sent if "-availability" in r.url.path]


def keys(offers: list[Offer]) -> set[tuple[str, str]]:
    return {(o.sku, o.region) for o in offers}


async def cluster_offer(adapter: VerdaAdapter) -> Offer:
    """The 16B200 offer, as a full read finds it."""
    return next(o for o in await adapter.fetch_offers() if (o.sku, o.region) == CLUSTER)


async def create(
    adapter: VerdaAdapter, offer: Offer, name: str = NAME, disk_gb: int | None = None
) -> VM:
    return await adapter.create_vm(offer, name=name, tag=TAG, ssh_public_key=None, disk_gb=disk_gb)


async def made_by_hand(verda_url: str, body: dict[str, Any]) -> str:
    """A cluster created with `body` as someone else would, not through the adapter: its id."""
    async with httpx.AsyncClient() as http:
        api = VerdaClient(
            http,
            base_url=f"{verda_url}/v1",
            client_id=SecretStr("sim-client"),
            client_secret=SecretStr("sim-secret"),
            timeout=PATIENT,
            create_timeout=PATIENT,
        )
        return await VerdaClusters(api).create_cluster(body, where="by hand")


async def find(adapter: VerdaAdapter, offer: Offer, name: str = NAME) -> list[VM]:
    return await adapter.find_vms(name=name, tag=TAG, offer=offer, not_before=datetime.now(UTC))


class TestOffers:
    async def test_a_cluster_in_stock_is_one_offer_of_its_nodes_beside_the_instance(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, *CLUSTER, 1)
        await stock(control, *INSTANCE, 1)
        offers = {o.sku: o for o in await adapter.fetch_offers()}
        assert set(offers) == {CLUSTER[0], INSTANCE[0]}
        cluster, instance = offers[CLUSTER[0]], offers[INSTANCE[0]]
        assert (cluster.region, cluster.gpu_model, cluster.gpu_count, cluster.nodes) == (
            "FIN-01", "B200", 8, 2,
        )  # fmt: skip
        assert cluster.price_per_hour == Decimal("71.84")  # the whole cluster's
        assert cluster.price_per_hour == 2 * instance.price_per_hour  # the simulator's pricing
        assert (cluster.cluster_interconnect, cluster.interconnect) == (
            ClusterInterconnect.INFINIBAND,
            Interconnect.SXM,
        )
        assert (cluster.vcpus, cluster.ram_gb) == (instance.vcpus, instance.ram_gb)  # per node
        # The shared volume is priced as its own type, not as an OS volume (NVMe).
        assert (cluster.disk_fixed, cluster.disk_price_per_gb_hour) == (False, SHARED_PER_GB_HOUR)
        assert instance.disk_price_per_gb_hour == Decimal("0.2") / 730
        assert (instance.nodes, instance.cluster_interconnect) == (1, None)
        assert cluster.machine == CLUSTER_MACHINE and instance.machine == INSTANCE_MACHINE

    async def test_cluster_stock_is_read_only_for_cluster_machines(
        self, adapter: VerdaAdapter
    ) -> None:
        await adapter.refresh_prices()
        assert adapter.stock_reads({CLUSTER_MACHINE}) == [limits.CLUSTER_READ]
        # The control: a single machine of the same model has no cluster read.
        singles = adapter.stock_reads({INSTANCE_MACHINE})
        assert limits.CLUSTER_READ not in singles
        assert singles == [limits.FULL_READ, limits.type_read(INSTANCE[0])]
        both = adapter.stock_reads({CLUSTER_MACHINE, INSTANCE_MACHINE})
        assert both == [*singles, limits.CLUSTER_READ]
        # No cluster type has three nodes of 8 B200.
        assert limits.CLUSTER_READ not in adapter.stock_reads({MachineKey("B200", 8, 3)})

    async def test_a_cluster_read_sends_only_that_and_keeps_the_instances(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient, sent: list[httpx.Request]
    ) -> None:
        await stock(control, *CLUSTER, 1)
        await stock(control, *INSTANCE, 1)
        assert keys(await adapter.fetch_offers()) == {CLUSTER, INSTANCE}
        assert stock_paths(sent) == ["/instance-availability", "/cluster-availability"]
        await stock(control, *CLUSTER, 0)
        await stock(control, *INSTANCE, 0)  # only an instance read would see this
        before = len(sent)
        after = await adapter.fetch_offers({CLUSTER_MACHINE})
        assert [r.url.path.removeprefix("/verda/v1") for r in sent[before:]] == [
            "/cluster-availability"
        ]
        assert keys(after) == {INSTANCE}  # the cluster is gone; the instance as last read
        assert adapter.budget.last_read_at > float("-inf")  # a planned stock read, counted

    async def test_a_full_read_for_stock_history_reads_the_clusters_too(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient, sent: list[httpx.Request]
    ) -> None:
        await stock(control, *CLUSTER, 1)
        assert keys(await adapter.fetch_offers()) == {CLUSTER}
        await stock(control, *CLUSTER, 0)
        # An instance read leaves the clusters as their last read found them...
        assert keys(await adapter.fetch_offers({INSTANCE_MACHINE})) == {CLUSTER}
        assert "/cluster-availability" not in stock_paths(sent)[2:]
        # ...and the full read finds them gone.
        assert await adapter.fetch_offers() == []
        assert stock_paths(sent)[-1] == "/cluster-availability"


class TestVMs:
    async def test_create_follow_find_list_and_delete(
        self,
        adapter: VerdaAdapter,
        control: httpx.AsyncClient,
        sent: list[httpx.Request],
        sim_clock: FakeClock,
    ) -> None:
        await stock(control, *CLUSTER, 1)
        await stock(control, *INSTANCE, 1)
        offer = await cluster_offer(adapter)
        vm = await create(adapter, offer)
        assert vm.id.startswith("cluster:")
        assert (vm.state, vm.provider_status, vm.name, vm.region, vm.sku, vm.tags) == (
            VMState.PENDING, "ordered", NAME, "FIN-01", "16B200", (TAG,),
        )  # fmt: skip
        posts = [r for r in sent if r.method == "POST" and r.url.path.endswith("/clusters")]
        assert len(posts) == 1
        (made,) = (await control.get("/_sim/creates")).json()
        assert (made["kind"], made["outcome"], f"cluster:{made['vm_id']}") == (
            "cluster", "created", vm.id,
        )  # fmt: skip
        (shown,) = (await control.get("/_sim/clusters")).json()
        assert shown["shared_volume_size"] == DEFAULT_DISK_GB  # always sent, never 30 TB
        # The simulator bills the volume apart, at the price the offer gave it, and the cluster
        # at the offer's price.
        assert Decimal(shown["price_per_hour"]) == offer.price_per_hour
        (volume,) = (await control.get("/_sim/volumes")).json()
        assert volume["name"] == f"{NAME}-shared" and volume["tags"] == [f"autoprovision={TAG}"]
        assert Decimal(volume["hourly_price"]) == DEFAULT_DISK_GB * offer.disk_price_per_gb_hour

        ordered = await adapter.get_vm(vm.id)
        assert ordered is not None and (ordered.state, ordered.ip) == (VMState.PENDING, None)

        async def running() -> VM | None:
            shown = await adapter.get_vm(vm.id)
            return shown if shown is not None and shown.state is VMState.RUNNING else None

        up = await eventually(running, clock=sim_clock)
        assert (up.id, up.name, up.region, up.sku, up.tags) == (
            vm.id, NAME, "FIN-01", "16B200", (TAG,),
        )  # fmt: skip
        assert up.ip == shown["ip"] and up.created_at is not None
        assert len(up.machines) == 2
        assert all(m.ip is not None and m.ip.startswith("10.") for m in up.machines)
        assert {m.state for m in up.machines} == {VMState.RUNNING}

        assert [v.id for v in await find(adapter, offer)] == [vm.id]
        assert await find(adapter, offer, name="ap-01jd3xq8w1-2") == []
        instance_offer = next(o for o in await adapter.fetch_offers() if o.nodes == 1)
        instance = await create(adapter, instance_offer)
        assert {v.id for v in await adapter.list_vms()} == {vm.id, instance.id}

        await adapter.delete_vm(vm.id)
        # Discontinued, its shared volume left detached and billing: a delete sent again, as
        # the terminator does, deletes the volume for good; then it is gone.
        going = await adapter.get_vm(vm.id)
        assert going is not None and (going.state, going.leftovers) == (VMState.DELETING, True)
        await adapter.delete_vm(vm.id)
        gone = await adapter.get_vm(vm.id)
        assert gone is not None and (gone.state, gone.leftovers) == (VMState.GONE, False)
        volumes = (await control.get("/_sim/volumes")).json()
        (volume,) = [v for v in volumes if v["cluster_id"] is not None]
        assert (volume["status"], volume["hourly_price"]) == ("deleted", "0")
        await adapter.delete_vm(vm.id)  # gone already: fine
        assert [v.id for v in await adapter.list_vms()] == [instance.id]

    async def test_find_tells_clusters_apart_by_name(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, *CLUSTER, 2)
        offer = await cluster_offer(adapter)
        first = await create(adapter, offer)
        other = await create(adapter, offer, name="ap-01jd3xq8w1-2", disk_gb=500)
        assert [v.id for v in await find(adapter, offer)] == [first.id]
        assert [v.id for v in await find(adapter, offer, name="ap-01jd3xq8w1-2")] == [other.id]
        made = (await control.get("/_sim/clusters")).json()
        sizes = {c["name"]: c["shared_volume_size"] for c in made}
        assert sizes == {NAME: DEFAULT_DISK_GB, "ap-01jd3xq8w1-2": 500}

    async def test_a_cluster_not_ours_is_not_listed(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient, verda_url: str
    ) -> None:
        await stock(control, *CLUSTER, 2)
        ours = await create(adapter, await cluster_offer(adapter))
        theirs = {
            "hostname": "someone-else", "cluster_type": CLUSTER[0], "location_code": CLUSTER[1],
            "image": "ubuntu-24.04-cuda-13.0-cluster", "description": "a training run",
            "shared_volume": {"name": "home", "size": 100},
        }  # fmt: skip
        await made_by_hand(verda_url, theirs)
        assert len((await control.get("/_sim/clusters")).json()) == 2
        assert [v.id for v in await adapter.list_vms()] == [ours.id]

    async def test_our_resource_tag_marks_a_cluster_ours_its_description_aside(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient, verda_url: str
    ) -> None:
        """Verda tags clusters since 2026-09-11: the tag is the owner's mark for crash
        recovery and sweeps; the description we write stays the fallback."""
        await stock(control, *CLUSTER, 1)
        offer = await cluster_offer(adapter)
        tagged = {
            "hostname": NAME, "cluster_type": CLUSTER[0], "location_code": CLUSTER[1],
            "image": "ubuntu-24.04-cuda-13.0-cluster", "description": "renamed by hand",
            "shared_volume": {"name": "home", "size": 100},
            "tags": [{"key": "autoprovision", "value": TAG}],
        }  # fmt: skip
        made = await made_by_hand(verda_url, tagged)
        (listed,) = await adapter.list_vms()
        assert (listed.id, listed.tags) == (f"cluster:{made}", (TAG,))
        assert [v.id for v in await find(adapter, offer)] == [listed.id]

    async def test_unknown_cluster_ids_are_none_and_deleting_them_is_fine(
        self, adapter: VerdaAdapter
    ) -> None:
        assert await adapter.get_vm(f"cluster:{MISSING}") is None
        assert await adapter.get_vm("cluster:not an id/..") is None
        await adapter.delete_vm(f"cluster:{MISSING}")

    async def test_a_refused_delete_while_ordered_is_retry_later(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient, sim_clock: FakeClock
    ) -> None:
        await stock(control, *CLUSTER, 1)
        vm = await create(adapter, await cluster_offer(adapter))
        await fault(control, "delete_refused")
        with pytest.raises(Unavailable, match="still ordered"):
            await adapter.delete_vm(vm.id)
        await adapter.delete_vm(vm.id)  # the fault was once
        await adapter.delete_vm(vm.id)  # and its shared volume
        gone = await adapter.get_vm(vm.id)
        assert gone is not None and gone.state is VMState.GONE

    async def test_no_stock_is_no_capacity(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient
    ) -> None:
        await stock(control, *CLUSTER, 1)
        offer = await cluster_offer(adapter)
        await stock(control, *CLUSTER, 0)
        with pytest.raises(NoCapacity):
            await create(adapter, offer)
        assert [c["outcome"] for c in (await control.get("/_sim/creates")).json()] == [
            "no_capacity"
        ]

    async def test_a_pair_a_create_was_answered_for_waits_for_the_next_cluster_read(
        self, adapter: VerdaAdapter, control: httpx.AsyncClient, sent: list[httpx.Request]
    ) -> None:
        await stock(control, *CLUSTER, 2)
        offer = await cluster_offer(adapter)
        # The control: an instance read keeps the cluster as the last cluster read found it.
        assert CLUSTER in keys(await adapter.fetch_offers({INSTANCE_MACHINE}))
        await create(adapter, offer)
        assert CLUSTER not in keys(await adapter.fetch_offers({INSTANCE_MACHINE}))
        assert stock_paths(sent)[-1].startswith("/instance-availability")
        read_anew = await adapter.fetch_offers({CLUSTER_MACHINE})
        assert stock_paths(sent)[-1] == "/cluster-availability"
        assert CLUSTER in keys(read_anew)  # the unit the create left


async def test_a_cluster_read_that_fails_leaves_the_instance_offers_alone(
    adapter: VerdaAdapter, control: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await stock(control, *CLUSTER, 1)
    await stock(control, *INSTANCE, 1)
    both = {(o.sku, o.nodes) for o in await adapter.fetch_offers()}
    assert both == {(CLUSTER[0], 2), (INSTANCE[0], 1)}  # control: both read when nothing fails

    async def refused(*_args: Any) -> Any:
        raise Unavailable(adapter.provider, "503 from /cluster-availability")

    clusters = adapter._clusters._calls  # the cluster calls only: the instances' still answer
    monkeypatch.setattr(clusters, "cluster_availability", refused)
    monkeypatch.setattr(clusters, "cluster_types", refused)
    await adapter.refresh_prices()  # the cluster types fail: the instance prices are still read
    offers = await adapter.fetch_offers()
    assert {(o.sku, o.nodes) for o in offers} == {(INSTANCE[0], 1)}  # no stale cluster offer
