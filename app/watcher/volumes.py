"""Volumes a provider keeps and bills apart from machines (Verda's OS and shared volumes): a
machine's delete names them, and the reconciler deletes any of ours a delete left behind (in
the trash, or detached: a crash between two deletes, a machine the provider ended itself)."""

from collections.abc import Iterable

from app.core.market import VM, VMState
from app.providers.base import Volume
from app.services.claims import VM_NAME_PREFIX, VM_TAG_PREFIX
from app.storage.models import Attempt

LEFT_BEHIND = frozenset({"detached", "trash"})  # a volume attached belongs to a machine


def stale_volumes(
    volumes: Iterable[Volume],
    recorded: Iterable[Attempt],
    vms: Iterable[VM],
    *,
    delete_untracked: bool,
) -> list[Volume]:
    """Of our volumes (listed before `recorded` and `vms`), those to delete: left behind (in
    the trash or detached), whose owner (the VM name, or the order tag, it was made for) has
    no attempt that owns a VM or may still make one, nor a VM the provider lists as not gone.
    One whose owner no attempt here knows (another database's?) only with `delete_untracked`,
    as for VMs and scripts."""
    by_name = {a.vm_name: [a] for a in recorded}
    by_tag: dict[str, list[Attempt]] = {}
    for attempt in recorded:
        by_tag.setdefault(attempt.tag, []).append(attempt)
    there = {vm.name for vm in vms if vm.name and vm.state is not VMState.GONE}
    there |= {tag for vm in vms if vm.state is not VMState.GONE for tag in vm.tags}
    stale = []
    for volume in volumes:
        owner = volume.owner
        if volume.status not in LEFT_BEHIND or owner is None or owner in there:
            continue
        if not owner.startswith((VM_NAME_PREFIX, VM_TAG_PREFIX)):
            continue
        owners = by_name.get(owner) or by_tag.get(owner)
        if owners is None:
            if delete_untracked:
                stale.append(volume)
        elif not any(a.status.is_open or a.status.owns_vm for a in owners):
            stale.append(volume)
    return stale
