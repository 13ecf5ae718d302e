"""The fake provider: scripted offers and create outcomes in memory, registered like any other."""

import asyncio
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from app.api.order_schemas import OrderCreate
from app.core.catalogue import ClusterInterconnect, Provider
from app.providers import fake
from app.providers.base import (
    MachineKey,
    NoCapacity,
    OutcomeUnknown,
    ProviderAdapter,
    Unavailable,
    VMState,
)
from app.providers.fake import Create, FakeAdapter
from app.providers.registry import (
    SPECS,
    build_adapters,
    display_name,
    offered_providers,
    offering,
    spec_for,
)
from app.settings import Settings
from tests.waiting import eventually

SINCE = datetime.now(UTC) - timedelta(minutes=1)


def order(provider: str) -> OrderCreate:
    return OrderCreate.model_validate(
        {"gpu_model": "H100", "gpu_count": 8, "providers": [provider], "max_price_per_hour": "25"}
    )


async def test_offers_are_what_was_set_and_reads_can_be_made_to_fail() -> None:
    adapter: ProviderAdapter = FakeAdapter()
    assert isinstance(adapter, FakeAdapter) and adapter.provider is Provider("fake")
    assert await adapter.fetch_offers() == []
    offer = adapter.offer(gpu_model="B300", price="40.00")
    adapter.set_offers(offer)
    adapter.fail_reads(Unavailable)
    with pytest.raises(Unavailable):
        await adapter.fetch_offers()
    assert await adapter.fetch_offers() == [offer]
    assert (offer.sku, offer.gpu_count, str(offer.price_per_hour)) == ("fake-b300x8", 8, "40.00")
    assert adapter.calls["fetch_offers"] == 3


async def test_creates_follow_the_queue_then_succeed() -> None:
    adapter = FakeAdapter()
    offer = adapter.offer()
    adapter.queue(
        Create.fails(NoCapacity), Create.unknown(made_vm=True), Create.unknown(made_vm=False)
    )
    for expected in (NoCapacity, OutcomeUnknown, OutcomeUnknown):
        with pytest.raises(expected):
            await adapter.create_vm(offer, name="n", tag="t", ssh_public_key=None)
    made = await adapter.create_vm(offer, name="ap-1", tag="ap-order-1", ssh_public_key="k")
    assert [c.vm_id is not None for c in adapter.creates] == [False, True, False, True]
    assert adapter.creates[-1].vm_id == made.id and adapter.creates[-1].ssh_public_key == "k"
    assert (made.state, made.name, made.tags) == (VMState.PENDING, "ap-1", ("ap-order-1",))
    assert len(await adapter.list_vms()) == 2  # the one the lost create made, and this one


async def test_vms_move_on_and_are_found_by_name_and_tag() -> None:
    adapter = FakeAdapter()
    offer = adapter.offer()
    vm = await adapter.create_vm(offer, name="ap-1", tag="ap-order-1", ssh_public_key=None)
    running = adapter.advance(vm.id, VMState.RUNNING, ip="192.0.2.10")
    assert await adapter.get_vm(vm.id) == running and running.ip == "192.0.2.10"
    assert await adapter.get_vm("nope") is None
    assert await adapter.find_vms(name="ap-1", tag="ap-order-1", offer=offer, not_before=SINCE)
    assert not await adapter.find_vms(name="ap-2", tag="ap-order-1", offer=offer, not_before=SINCE)
    await adapter.delete_vm(vm.id)
    assert adapter.deleted == [vm.id] and await adapter.list_vms() == []


async def test_without_finds_vms_by_name_are_found_by_kind_and_time() -> None:
    adapter = FakeAdapter(Provider("fake-unnamed"), finds_vms_by_name=False)
    offer, other = adapter.offer(), adapter.offer(region="FAKE-2")
    vm = await adapter.create_vm(offer, name="ap-1", tag="ap-order-1", ssh_public_key=None)
    assert (vm.name, vm.tags) == (None, ())
    found = await adapter.find_vms(name="x", tag="y", offer=offer, not_before=SINCE)
    assert [v.id for v in found] == [vm.id]
    assert await adapter.find_vms(name="x", tag="y", offer=other, not_before=SINCE) == []
    later = datetime.now(UTC) + timedelta(minutes=1)
    assert await adapter.find_vms(name="x", tag="y", offer=offer, not_before=later) == []


async def test_a_create_can_be_held_until_the_test_lets_it_go() -> None:
    adapter = FakeAdapter()
    release = asyncio.Event()
    adapter.queue(Create.ok(wait_for=release))
    call = asyncio.create_task(
        adapter.create_vm(adapter.offer(), name="n", tag="t", ssh_public_key=None)
    )

    async def sent() -> bool:
        return len(adapter.creates) == 1

    await eventually(sent)
    assert not call.done()
    release.set()
    assert (await call).id == adapter.creates[0].vm_id


def test_it_is_registered_by_one_line_but_offered_only_inside_a_test() -> None:
    assert fake.SPEC in SPECS and spec_for("fake") is fake.SPEC
    assert Provider("fake") not in offered_providers()
    with pytest.raises(ValueError, match="providers"):
        order("fake")
    with offering(fake.SPEC):
        assert offered_providers()[-1] == Provider("fake")
        assert order("fake").providers == [Provider("fake")]
        assert display_name("fake") == "Fake"
    assert Provider("fake") not in offered_providers()


async def test_registered_fakes_get_adapters_from_the_registry_while_offered() -> None:
    unnamed = fake.fake_spec(Provider("fake-unnamed"), finds_vms_by_name=False)
    settings = Settings(_env_file=None)
    async with httpx.AsyncClient() as client:
        assert build_adapters(settings, client) == {}
        with offering(fake.SPEC, unnamed):
            adapters = build_adapters(settings, client)
            assert spec_for("fake-unnamed").finds_vms_by_name is False
            assert order("fake-unnamed").providers == [Provider("fake-unnamed")]
    assert set(adapters) == {Provider("fake"), Provider("fake-unnamed")}
    assert all(isinstance(a, FakeAdapter) for a in adapters.values())
    with pytest.raises(LookupError):
        spec_for("fake-unnamed")


async def test_a_cluster_offer_can_be_scripted() -> None:
    adapter = FakeAdapter()
    cluster = adapter.offer(
        gpu_model="B200",
        nodes=2,
        price="80.00",
        cluster_interconnect=ClusterInterconnect.INFINIBAND,
    )
    single = adapter.offer(gpu_model="B200", price="40.00")
    adapter.set_offers(cluster, single)
    assert await adapter.fetch_offers() == [cluster, single]
    assert (cluster.sku, cluster.gpu_count, cluster.nodes) == ("fake-b200x8-n2", 8, 2)
    assert cluster.cluster_interconnect is ClusterInterconnect.INFINIBAND
    assert cluster.machine == MachineKey("B200", 8, 2) != single.machine
    assert (single.sku, single.nodes, single.cluster_interconnect) == ("fake-b200x8", 1, None)
