"""Start-up scripts a provider keeps apart from VMs (Verda's, at most 100 a project): each is
deleted once its VM is gone, and the reconciler deletes any whose delete did not happen."""

import logging
from collections.abc import Iterable

from app.core.market import VM, VMState
from app.providers.base import ProviderAdapter, ProviderError
from app.services.claims import VM_NAME_PREFIX
from app.storage.models import Attempt

log = logging.getLogger(__name__)


async def delete_startup_script(adapter: ProviderAdapter, vm_name: str) -> None:
    """Delete the start-up script kept for a VM that is gone (or was never made); one that
    cannot be deleted now is the reconciler's to delete later."""
    try:
        await adapter.delete_startup_script(vm_name)
    except ProviderError as exc:
        log.info("start-up script of %s not deleted yet: %s", vm_name, exc.message)


def stale_scripts(
    names: Iterable[str],
    recorded: Iterable[Attempt],
    vms: Iterable[VM],
    *,
    delete_untracked: bool,
) -> list[str]:
    """Of the scripts listed (`names`, read before `recorded` and `vms`), those to delete: named
    after an attempt of ours that no longer owns a VM nor may make one, whose VM the provider
    no longer lists. A script named like ours that no attempt here knows (another
    database's?) only with `delete_untracked`, as for VMs."""
    attempts = {a.vm_name: a for a in recorded}
    # Kept while its VM is listed in any state but gone: a script outlives no VM it may boot.
    there = {vm.name for vm in vms if vm.name and vm.state is not VMState.GONE}
    stale = []
    for name in sorted(set(names)):
        if not name.startswith(VM_NAME_PREFIX) or name in there:
            continue
        attempt = attempts.get(name)
        if attempt is None:
            if delete_untracked:
                stale.append(name)
        elif not attempt.status.is_open and not attempt.status.owns_vm:
            stale.append(name)
    return stale
