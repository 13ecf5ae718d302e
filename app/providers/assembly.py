"""Clusters assembled from single VMs, at a provider that sells none (Hyperstack).

A cluster of N is N creates sent together, node n named `<the attempt's name>-<n>` and tagged
as any VM of the order. To the rest of the service the N VMs are one VM, `nodes:<the attempt's
name>`, whose `machines` are the nodes as the provider lists them now: an id that does not
change as nodes come and go, so one attempt owns it (the database's one-owner index) from the
create to the last node's delete. Whether all N were made and all run is the follower's call
(`watcher/follower.py`), from the nodes listed against the attempt's `nodes`.

Offers are the provider's single ones where its stock says N are there at once: the same
region and flavor, N times the price, SKU `<flavor>.x<N>`.
"""

import asyncio
import re
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import replace

from app.core.catalogue import Provider
from app.core.market import ENDED_VM_STATES, VM, Machine, MachineKey, Offer, VMState
from app.providers.base import OutcomeUnknown, ProviderError

ASSEMBLED_PREFIX = "nodes:"
_SKU = re.compile(r"^(?P<sku>.+)\.x(?P<nodes>[0-9]+)$")
# `ap-<order token>-<attempt>-<node>`: the names `claims.vm_name` makes, plus a node.
_NODE_NAME = re.compile(r"^(?P<base>ap-[0-9a-z]+-[0-9]+)-(?P<node>[0-9]+)$")

CreateOne = Callable[[Offer, str], Awaitable[VM]]  # (single offer, node name) -> the VM
SearchNodes = Callable[[str], Awaitable[list[VM]]]  # name prefix -> VMs whose name has it
DeleteOne = Callable[[str], Awaitable[None]]


def node_name(name: str, node: int) -> str:
    """The name node `node` (from 1) of a cluster whose attempt is named `name` is created with."""
    return f"{name}-{node}"


def assembled_id(name: str) -> str:
    """The VM id of the cluster an attempt named `name` assembles."""
    return f"{ASSEMBLED_PREFIX}{name}"


def is_assembled(vm_id: str) -> bool:
    """Whether `vm_id` is an assembled cluster's."""
    return vm_id.startswith(ASSEMBLED_PREFIX)


def assembled_sku(sku: str, nodes: int) -> str:
    """The SKU of N single machines of `sku` taken together."""
    return f"{sku}.x{nodes}"


def single_offer(offer: Offer) -> Offer:
    """One node of an assembled offer: the provider's own flavor at its own price."""
    matched = _SKU.match(offer.sku)
    if matched is None or int(matched["nodes"]) != offer.nodes:
        raise ValueError(f"{offer.sku} is not an assembled offer of {offer.nodes} nodes")
    return replace(
        offer,
        sku=matched["sku"],
        nodes=1,
        price_per_hour=offer.price_per_hour / offer.nodes,
        available=None,
    )


def assembled_offers(singles: Iterable[Offer], machines: Collection[MachineKey]) -> list[Offer]:
    """For each cluster in `machines`, the single offers of its shape whose stock says all its
    nodes are there at once, as one offer (an unknown count is not enough)."""
    wanted: dict[tuple[str, int], set[int]] = defaultdict(set)
    for machine in machines:
        if machine.nodes > 1:
            wanted[(machine.gpu_model, machine.gpu_count)].add(machine.nodes)
    offers = []
    for offer in singles:
        if offer.nodes != 1 or offer.available is None:
            continue
        for nodes in sorted(wanted.get((offer.gpu_model, offer.gpu_count), ())):
            if offer.available >= nodes:
                offers.append(
                    replace(
                        offer,
                        sku=assembled_sku(offer.sku, nodes),
                        nodes=nodes,
                        price_per_hour=offer.price_per_hour * nodes,
                        available=offer.available // nodes,
                        offer_id=None,
                        cluster_interconnect=None,
                    )
                )
    return offers


def _node_of(vm: VM) -> tuple[str, int] | None:
    matched = _NODE_NAME.match(vm.name or "")
    return None if matched is None else (matched["base"], int(matched["node"]))


def _state(nodes: list[VM]) -> VMState:
    live = [vm.state for vm in nodes if vm.state not in ENDED_VM_STATES]
    if not live:
        for ended in (VMState.FAILED, VMState.SUSPENDED, VMState.DELETING):
            if ended in (vm.state for vm in nodes):
                return ended
        return VMState.GONE
    if all(state is VMState.RUNNING for state in live):
        return VMState.RUNNING
    for state in (VMState.PENDING, VMState.STOPPED):
        if state in live:
            return state
    return VMState.UNKNOWN


def assembled_vm(provider: Provider, name: str, nodes: Iterable[VM]) -> VM | None:
    """The cluster whose nodes (VMs named `<name>-<n>`) are `nodes`; None when there are none.

    It runs when every node it has runs, reached at its first live node's address; a node that
    ended is listed as such, and the cluster has ended when all have.
    """
    ordered = sorted(
        ((found[1], vm) for vm in nodes if (found := _node_of(vm)) and found[0] == name),
        key=lambda pair: pair[0],
    )
    if not ordered:
        return None
    vms = [vm for _, vm in ordered]
    state = _state(vms)
    live = [vm for vm in vms if vm.state not in ENDED_VM_STATES]
    counts = Counter(vm.provider_status for vm in vms)
    first = vms[0]
    return VM(
        provider=provider,
        id=assembled_id(name),
        state=state,
        provider_status=", ".join(f"{n} {status}" for status, n in counts.items()),
        name=name,
        region=first.region,
        sku=None if first.sku is None else assembled_sku(first.sku, len(vms)),
        ip=live[0].ip if live and state is VMState.RUNNING else None,
        created_at=min((vm.created_at for vm in vms if vm.created_at), default=None),
        tags=first.tags,
        machines=tuple(
            Machine(
                id=vm.id,
                state=vm.state,
                provider_status=vm.provider_status,
                name=vm.name,
                ip=vm.ip,
            )
            for vm in vms
        ),
    )


def grouped(provider: Provider, vms: Iterable[VM]) -> list[VM]:
    """A listing with each assembled cluster's nodes as one VM (the other VMs as they are)."""
    singles: list[VM] = []
    clusters: dict[str, list[VM]] = defaultdict(list)
    for vm in vms:
        found = _node_of(vm)
        if found is None:
            singles.append(vm)
        else:
            clusters[found[0]].append(vm)
    assembled = (assembled_vm(provider, name, nodes) for name, nodes in clusters.items())
    return [*singles, *(vm for vm in assembled if vm is not None)]


class NodeAssembly:
    """Creates, finds and deletes assembled clusters through one provider's single-VM calls."""

    def __init__(
        self,
        provider: Provider,
        *,
        search: SearchNodes,
        delete_one: DeleteOne,
    ) -> None:
        self.provider = provider
        self._search = search
        self._delete_one = delete_one

    async def create(self, offer: Offer, *, name: str, create_one: CreateOne) -> VM:
        """Send the N creates at once. All accepted: the cluster, its nodes starting. Some
        accepted and the rest refused: the cluster with the nodes made (fewer than N, so the
        follower deletes them and the order waits). None accepted: the first node's refusal.
        Any create without a clear answer: `OutcomeUnknown` (the look-up counts the nodes)."""
        single = single_offer(offer)
        names = [node_name(name, n) for n in range(1, offer.nodes + 1)]
        answers = await asyncio.gather(
            *(create_one(single, node) for node in names), return_exceptions=True
        )
        # Accepted VMs carry the names they were sent with, whatever the answer said.
        made = [
            replace(answer, name=node)
            for node, answer in zip(names, answers, strict=True)
            if isinstance(answer, VM)
        ]
        failed = [answer for answer in answers if isinstance(answer, BaseException)]
        refused = [error for error in failed if _clearly_refused(error)]
        unclear = [error for error in failed if not _clearly_refused(error)]
        if unclear:
            raise OutcomeUnknown(
                self.provider,
                f"{len(made)} of {offer.nodes} node creates accepted, {len(unclear)} with no "
                f"clear answer ({_message(unclear[0])})",
            ) from unclear[0]
        if not made:
            raise refused[0]
        cluster = assembled_vm(self.provider, name, made)
        assert cluster is not None  # at least one node was made
        return cluster

    async def nodes(self, name: str) -> list[VM]:
        """The nodes of the cluster named `name` the provider lists now."""
        found = await self._search(f"{name}-")
        return [vm for vm in found if (node := _node_of(vm)) is not None and node[0] == name]

    async def get(self, vm_id: str) -> VM | None:
        """The cluster, or None when the provider lists none of its nodes."""
        name = vm_id.removeprefix(ASSEMBLED_PREFIX)
        return assembled_vm(self.provider, name, await self.nodes(name))

    async def find(self, *, name: str, tag: str) -> list[VM]:
        """The cluster an unclear create named `name` may have made (nodes tagged `tag`)."""
        nodes = [vm for vm in await self.nodes(name) if tag in vm.tags]
        cluster = assembled_vm(self.provider, name, nodes)
        return [] if cluster is None else [cluster]

    async def delete(self, vm_id: str) -> None:
        """Delete every node not deleted yet; the first refusal is raised once all were sent
        (a node still being created is refused, and the delete is tried again later)."""
        nodes = await self.nodes(vm_id.removeprefix(ASSEMBLED_PREFIX))
        pending = [vm for vm in nodes if vm.state not in (VMState.GONE, VMState.DELETING)]
        answers = await asyncio.gather(
            *(self._delete_one(vm.id) for vm in pending), return_exceptions=True
        )
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer


def _clearly_refused(error: BaseException) -> bool:
    """A refusal that made no VM: a typed provider error other than `OutcomeUnknown`."""
    return isinstance(error, ProviderError) and not isinstance(error, OutcomeUnknown)


def _message(error: BaseException) -> str:
    return error.message if isinstance(error, ProviderError) else type(error).__name__
