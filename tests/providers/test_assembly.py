"""Clusters assembled from single VMs: offers from stock counts, nodes as one VM, and the N
creates' outcomes (all made, some refused, some unclear)."""

from decimal import Decimal

import pytest

from app.core.catalogue import Provider
from app.core.market import VM, MachineKey, Offer, VMState
from app.providers import assembly
from app.providers.base import NoCapacity, OutcomeUnknown, Rejected

HYPERSTACK = Provider("hyperstack")
NAME = "ap-01abc-3"


def single(available: int | None, gpu_count: int = 1) -> Offer:
    return Offer(
        provider=HYPERSTACK,
        region="CANADA-1",
        sku="n3-H100x1",
        gpu_model="H100",
        gpu_count=gpu_count,
        price_per_hour=Decimal("2.40"),
        available=available,
    )


def node(n: int, state: VMState = VMState.RUNNING, name: str = NAME) -> VM:
    return VM(
        HYPERSTACK,
        str(100 + n),
        state,
        state.value.upper(),
        name=f"{name}-{n}",
        sku="n3-H100x1",
        region="CANADA-1",
        ip=f"203.0.113.{n}" if state is VMState.RUNNING else None,
        tags=("ap-order-01abc",),
    )


class TestOffers:
    def test_a_cluster_is_offered_only_where_the_stock_holds_all_its_nodes(self) -> None:
        wanted = {MachineKey("H100", 1, 2), MachineKey("H100", 1, 3), MachineKey("H100", 8, 2)}
        (two,) = assembly.assembled_offers([single(2)], wanted)
        assert (two.sku, two.nodes, two.price_per_hour, two.available) == (
            "n3-H100x1.x2",
            2,
            Decimal("4.80"),
            1,
        )
        assert two.cluster_interconnect is None
        offered = assembly.assembled_offers([single(3)], wanted)
        assert sorted(o.nodes for o in offered) == [2, 3]

    def test_an_unknown_count_or_no_cluster_wanted_offers_none(self) -> None:
        assert assembly.assembled_offers([single(None)], {MachineKey("H100", 1, 2)}) == []
        assert assembly.assembled_offers([single(5)], {MachineKey("H100", 1, 1)}) == []
        assert assembly.assembled_offers([single(5)], ()) == []

    def test_one_node_of_an_assembled_offer_is_the_flavor_at_its_own_price(self) -> None:
        (two,) = assembly.assembled_offers([single(2)], {MachineKey("H100", 1, 2)})
        one = assembly.single_offer(two)
        assert (one.sku, one.nodes, one.price_per_hour) == ("n3-H100x1", 1, Decimal("2.40"))
        with pytest.raises(ValueError):
            assembly.single_offer(single(2))


class TestNodesAsOneVM:
    def test_all_running_runs_at_the_first_node(self) -> None:
        vm = assembly.assembled_vm(HYPERSTACK, NAME, [node(2), node(1)])
        assert vm is not None
        assert (vm.id, vm.state, vm.ip, vm.sku) == (
            f"nodes:{NAME}",
            VMState.RUNNING,
            "203.0.113.1",
            "n3-H100x1.x2",
        )
        assert [m.name for m in vm.machines] == [f"{NAME}-1", f"{NAME}-2"]

    def test_one_booting_is_pending_and_one_ended_is_listed_as_ended(self) -> None:
        booting = assembly.assembled_vm(HYPERSTACK, NAME, [node(1), node(2, VMState.PENDING)])
        assert booting is not None and (booting.state, booting.ip) == (VMState.PENDING, None)
        one_lost = assembly.assembled_vm(HYPERSTACK, NAME, [node(1), node(2, VMState.FAILED)])
        assert one_lost is not None and one_lost.state is VMState.RUNNING
        assert [m.state for m in one_lost.machines] == [VMState.RUNNING, VMState.FAILED]
        gone = assembly.assembled_vm(
            HYPERSTACK, NAME, [node(1, VMState.GONE), node(2, VMState.DELETING)]
        )
        assert gone is not None and gone.state is VMState.DELETING

    def test_a_listing_groups_each_clusters_nodes_and_keeps_other_vms(self) -> None:
        lone = VM(HYPERSTACK, "7", VMState.RUNNING, "ACTIVE", name="ap-01abc-2")
        other = node(1, name="ap-01xyz-1")
        listed = assembly.grouped(HYPERSTACK, [node(1), lone, node(2), other])
        assert sorted(vm.id for vm in listed) == ["7", f"nodes:{NAME}", "nodes:ap-01xyz-1"]
        assert assembly.assembled_vm(HYPERSTACK, NAME, [lone, other]) is None


class Nodes:
    """Single-VM calls held in memory: each create answers as scripted, by node."""

    def __init__(self, answers: dict[int, VM | Exception]) -> None:
        self.answers = answers
        self.made: dict[str, VM] = {}
        self.deleted: list[str] = []
        self.refuse_delete: set[str] = set()
        self.calls = assembly.NodeAssembly(HYPERSTACK, search=self.search, delete_one=self.delete)

    async def create(self, offer: Offer, name: str) -> VM:
        assert offer.sku == "n3-H100x1" and offer.nodes == 1
        answer = self.answers[int(name.rpartition("-")[2])]
        if isinstance(answer, Exception):
            raise answer
        vm = VM(HYPERSTACK, answer.id, VMState.PENDING, "CREATING", tags=answer.tags)
        self.made[vm.id] = VM(HYPERSTACK, vm.id, VMState.PENDING, "CREATING", name=name)
        return vm

    async def search(self, prefix: str) -> list[VM]:
        return [vm for vm in self.made.values() if prefix in (vm.name or "")]

    async def delete(self, vm_id: str) -> None:
        if vm_id in self.refuse_delete:
            raise Rejected(HYPERSTACK, "being created")
        self.deleted.append(vm_id)


def two() -> Offer:
    (offer,) = assembly.assembled_offers([single(2)], {MachineKey("H100", 1, 2)})
    return offer


class TestCreates:
    async def test_all_accepted_is_the_cluster_with_every_node_named(self) -> None:
        nodes = Nodes({1: node(1), 2: node(2)})
        vm = await nodes.calls.create(two(), name=NAME, create_one=nodes.create)
        assert vm.id == f"nodes:{NAME}" and vm.state is VMState.PENDING
        assert [m.name for m in vm.machines] == [f"{NAME}-1", f"{NAME}-2"]

    async def test_one_refused_is_the_cluster_of_the_node_made(self) -> None:
        nodes = Nodes({1: node(1), 2: NoCapacity(HYPERSTACK, "out of stock")})
        vm = await nodes.calls.create(two(), name=NAME, create_one=nodes.create)
        assert [m.id for m in vm.machines] == ["101"]

    async def test_all_refused_raises_the_refusal(self) -> None:
        refused = NoCapacity(HYPERSTACK, "out of stock")
        nodes = Nodes({1: refused, 2: NoCapacity(HYPERSTACK, "out of stock")})
        with pytest.raises(NoCapacity):
            await nodes.calls.create(two(), name=NAME, create_one=nodes.create)

    async def test_any_unclear_answer_makes_the_whole_create_unclear(self) -> None:
        nodes = Nodes({1: OutcomeUnknown(HYPERSTACK, "timed out"), 2: node(2)})
        with pytest.raises(OutcomeUnknown, match="1 of 2 node creates accepted"):
            await nodes.calls.create(two(), name=NAME, create_one=nodes.create)
        crashed = Nodes({1: RuntimeError("bug"), 2: NoCapacity(HYPERSTACK, "gone")})
        with pytest.raises(OutcomeUnknown):
            await crashed.calls.create(two(), name=NAME, create_one=crashed.create)


class TestDeletes:
    async def test_every_node_is_sent_its_delete_and_a_refusal_is_raised_after(self) -> None:
        nodes = Nodes({1: node(1), 2: node(2)})
        await nodes.calls.create(two(), name=NAME, create_one=nodes.create)
        nodes.refuse_delete = {"101"}
        with pytest.raises(Rejected):
            await nodes.calls.delete(f"nodes:{NAME}")
        assert nodes.deleted == ["102"]  # sent although the other was refused
        nodes.refuse_delete = set()
        await nodes.calls.delete(f"nodes:{NAME}")
        assert sorted(nodes.deleted) == ["101", "102", "102"]
