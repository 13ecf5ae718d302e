"""Which VM an unclear create made, decided from what the provider lists: a pure function.

An attempt whose create got no clear answer is resolved by looking at the provider's VMs.

- Where VMs carry the name their create was sent with (Verda, Hyperstack), a VM is an attempt's
  only if it carries that attempt's own name, which no other attempt ever uses.
- Where they carry nothing of ours (QuantaCloud), a VM is a *candidate* of an attempt when no
  attempt owns it and, as far as the listing says, it is of the attempt's kind (region and
  sku) and was made after the attempt began (less clock skew). The attempt adopts a candidate
  only when no other open attempt (create in flight, or unclear too) could have made any of its
  candidates; otherwise it waits for those attempts' answers. Claims keep one open attempt per
  kind at such providers (a unique index), so with listings that give the kind, no other open
  attempt can compete for a candidate, and three unclear creates of one kind are resolved one
  after another, each adopting its own VM.
- Several candidates and no competing attempt: they are all VMs no order owns that this
  attempt could have made; the one made nearest the attempt is adopted and the reconciler
  reports the others (a VM that showed up after its own attempt was given up on).
"""

from dataclasses import dataclass
from datetime import datetime

from app.core.market import VM, VMState
from app.providers.base import PROVIDER_CLOCK_SKEW
from app.providers.registry import vm_named
from app.storage.models import Attempt


@dataclass(frozen=True)
class AttemptView:
    """What the decision needs of one create attempt."""

    id: str
    order_id: str
    number: int  # among its order's attempts
    region: str
    sku: str
    vm_name: str
    created_at: datetime
    status: str


def view(attempt: Attempt) -> AttemptView:
    """What the decision needs of an attempt row."""
    return AttemptView(
        id=attempt.id,
        order_id=attempt.order_id,
        number=attempt.number,
        region=attempt.region,
        sku=attempt.sku,
        vm_name=attempt.vm_name,
        created_at=attempt.created_at,
        status=attempt.status,
    )


@dataclass(frozen=True)
class Adopt:
    """The attempt made `vm`; `others` could have been its VM too and are left to the report."""

    vm: VM
    others: tuple[VM, ...] = ()


@dataclass(frozen=True)
class NotCreated:
    """No VM came of the attempt."""


@dataclass(frozen=True)
class Wait:
    """Cannot tell yet; `reason` says why, for the order's timeline."""

    reason: str


Decision = Adopt | NotCreated | Wait


def could_have_made(attempt: AttemptView, vm: VM, *, finds_vms_by_name: bool) -> bool:
    """Whether `vm` may be what `deployment`'s create made, by all the listing says of it."""
    if finds_vms_by_name:
        return vm.name == attempt.vm_name
    if vm.region is not None and vm.region.lower() != attempt.region.lower():
        return False
    if vm.sku is not None and vm.sku.lower() != attempt.sku.lower():
        return False
    return vm.created_at is None or vm.created_at >= attempt.created_at - PROVIDER_CLOCK_SKEW


def decide(
    attempt: AttemptView,
    found: list[VM],
    *,
    owned: set[str],
    rivals: list[AttemptView],
    finds_vms_by_name: bool,
) -> Decision:
    """Resolve `deployment` from the provider's VMs, the VM ids attempts own, and the other
    attempts at the provider whose outcome is not recorded yet (`rivals`)."""
    candidates = [
        vm
        for vm in found
        if vm.state is not VMState.GONE
        and vm.id not in owned
        and could_have_made(attempt, vm, finds_vms_by_name=finds_vms_by_name)
    ]
    if not candidates:
        return NotCreated()
    if finds_vms_by_name:
        if len(candidates) > 1:
            ids = ", ".join(vm.id for vm in candidates)
            return Wait(f"Several VMs carry this attempt's name ({ids}): waiting for one answer")
        return Adopt(candidates[0])
    for vm in candidates:
        for rival in rivals:
            if rival.id != attempt.id and could_have_made(rival, vm, finds_vms_by_name=False):
                return Wait(
                    f"{vm_named(vm.id)} could also be what the create for {rival.order_id} made, "
                    "whose answer is not in yet: deciding once it is"
                )
    chosen = min(candidates, key=lambda vm: _distance(attempt, vm))
    return Adopt(chosen, tuple(vm for vm in candidates if vm is not chosen))


def _distance(attempt: AttemptView, vm: VM) -> tuple[int, float]:
    if vm.created_at is None:
        return (1, 0.0)
    return (0, abs((vm.created_at - attempt.created_at).total_seconds()))


def possible_owners(
    vm: VM, recorded: list[AttemptView], *, finds_vms_by_name: bool
) -> list[AttemptView]:
    """The attempts `vm` may have come from (for the report of a VM no order owns)."""
    return [d for d in recorded if could_have_made(d, vm, finds_vms_by_name=finds_vms_by_name)]
