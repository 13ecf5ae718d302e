"""Periodic checks that nothing is left behind: open holds, VMs no order owns, and start-up
scripts and volumes whose VM is gone."""

import logging
from datetime import datetime, timedelta

from app.core.catalogue import Provider
from app.core.states import AttemptStatus
from app.providers.base import VM, ProviderAdapter, ProviderError, VMState, delete_urgently
from app.providers.registry import display_name, spec_for
from app.services import attempts, ledger
from app.services.claims import VM_TAG_PREFIX
from app.storage.db import session_scope
from app.storage.models import Attempt
from app.support.metrics import UNTRACKED_VMS
from app.watcher.adoption import possible_owners, view
from app.watcher.context import WatcherContext
from app.watcher.scripts import delete_startup_script, stale_scripts
from app.watcher.volumes import stale_volumes

log = logging.getLogger(__name__)
GONE = (VMState.GONE, VMState.DELETING)
TIMESTAMP_PRECISION = timedelta(seconds=1)


class Reconciler:
    """Releases stray holds; finds (and, if allowed, deletes) VMs that no order owns."""

    def __init__(
        self,
        context: WatcherContext,
        *,
        grace_seconds: float,
        delete_untracked: bool,
    ) -> None:
        self.context = context
        self.grace = timedelta(seconds=grace_seconds)
        self.delete_untracked = delete_untracked
        self.reported: set[tuple[str, str]] = set()

    async def tick(self) -> None:
        """One pass over holds and every provider's VMs."""
        async with session_scope(self.context.sessionmaker) as session:
            released = await ledger.release_stray_holds(session)
        if released:
            log.warning("released %d holds no create attempt stood behind", len(released))
        for provider, adapter in self.context.adapters.items():
            try:
                await self._sweep(provider, adapter)
            except ProviderError as exc:
                log.info("untracked-VM sweep of %s skipped: %s", provider, exc)
            try:
                await self._sweep_scripts(provider, adapter)
            except ProviderError as exc:
                log.info("start-up script sweep of %s skipped: %s", provider, exc)
            try:
                await self._sweep_volumes(provider, adapter)
            except ProviderError as exc:
                log.info("volume sweep of %s skipped: %s", provider, exc)

    async def _sweep_scripts(self, provider: Provider, adapter: ProviderAdapter) -> None:
        """Delete the start-up scripts whose VM is gone (`scripts.stale_scripts`)."""
        # Listed first: a script listed was made after its attempt was committed, so the
        # attempts read next know it, open if its create may still be on the way.
        names = await adapter.list_startup_scripts()
        if not names:
            return
        vms = await adapter.list_vms()
        recorded = await self._recorded(provider)
        for name in stale_scripts(names, recorded, vms, delete_untracked=self.delete_untracked):
            log.info("deleting %s's start-up script %s: its VM is gone", provider, name)
            await delete_startup_script(adapter, name)

    async def _sweep_volumes(self, provider: Provider, adapter: ProviderAdapter) -> None:
        """Delete our volumes whose machine is gone (`volumes.stale_volumes`)."""
        found = await adapter.list_volumes()  # listed first, as scripts are
        if not found:
            return
        vms = await adapter.list_vms()
        recorded = await self._recorded(provider)
        for volume in stale_volumes(found, recorded, vms, delete_untracked=self.delete_untracked):
            log.warning(
                "deleting %s's volume %s (%s, %s): its machine is gone",
                provider,
                volume.id,
                volume.name,
                volume.status,
            )
            await adapter.delete_volume(volume.id)

    async def _recorded(self, provider: Provider) -> list[Attempt]:
        async with session_scope(self.context.sessionmaker) as session:
            return await attempts.recorded_at(session, provider=str(provider))

    async def untracked(self, provider: Provider, vms: list[VM]) -> list[VM]:
        """The VMs no attempt owns, leaving out young ones a create in flight may still claim."""
        return self._untracked(vms, await self._recorded(provider))

    def _untracked(self, vms: list[VM], recorded: list[Attempt]) -> list[VM]:
        owned = {a.provider_vm_id for a in recorded if a.provider_vm_id}
        resolving = {a.vm_name for a in recorded if a.status.is_open}
        young = self.context.clock() - self.grace
        return [
            vm
            for vm in vms
            if vm.state not in GONE
            and vm.id not in owned
            and vm.name not in resolving
            and not _created_after(vm, young)
        ]

    async def _sweep(self, provider: Provider, adapter: ProviderAdapter) -> None:
        vms = await adapter.list_vms()
        recorded = await self._recorded(provider)
        owned = {a.provider_vm_id for a in recorded if a.provider_vm_id}
        released = {a.vm_name for a in recorded if a.status == AttemptStatus.NOT_CREATED}
        await self._delete_ended(provider, adapter, vms, recorded)
        for vm in vms:
            # Its attempt was looked up, nothing was found and it was released (hold and all):
            # the provider made the VM later. It carries that attempt's own name, so it is
            # certainly ours and certainly unwanted.
            stale = vm.name in released and vm.id not in owned and vm.state not in GONE
            if stale and await _deleted(adapter, vm):
                log.warning("deleted %s VM %s made after its attempt was released", provider, vm.id)
        strays = [vm for vm in self._untracked(vms, recorded) if vm.name not in released]
        UNTRACKED_VMS.labels(str(provider)).set(len(strays))
        for vm in strays:
            ours = any(tag.startswith(VM_TAG_PREFIX) for tag in vm.tags)
            if (str(provider), vm.id) not in self.reported:
                self.reported.add((str(provider), vm.id))
                log.warning(
                    "%s VM %s (%s) is %s but no order owns it%s",
                    display_name(provider),
                    vm.id,
                    vm.name,
                    "tagged by us" if ours else "on our account",
                    _may_belong_to(provider, vm, recorded),
                )
            if self.delete_untracked and ours and await _deleted(adapter, vm):
                log.warning("deleted untracked %s VM %s", display_name(provider), vm.id)

    async def _delete_ended(
        self,
        provider: Provider,
        adapter: ProviderAdapter,
        vms: list[VM],
        recorded: list[Attempt],
    ) -> None:
        """Delete again VMs whose order is terminated or lost but that the provider still has
        (a delete that did not stick, a lost VM left failed or suspended); report those that
        cannot be deleted."""
        live = {a.provider_vm_id for a in recorded if a.status.owns_vm}
        # A failed attempt's VM was deleted before it settled; one still there (a cluster's
        # node listed late, after its siblings were taken apart) is deleted again.
        ended = {
            a.provider_vm_id: a.order_id
            for a in recorded
            if a.status.is_ended or a.status is AttemptStatus.FAILED
        }
        for vm in vms:
            if vm.id not in ended or vm.id in live or vm.state in GONE:
                continue
            try:
                await delete_urgently(adapter, vm.id)
            except ProviderError as exc:
                log.warning(
                    "%s VM %s of ended order %s is still there and cannot be deleted: %s",
                    display_name(provider),
                    vm.id,
                    ended[vm.id],
                    exc.message,
                )
                continue
            log.warning(
                "deleted %s VM %s, still there after its order %s ended",
                display_name(provider),
                vm.id,
                ended[vm.id],
            )


async def _deleted(adapter: ProviderAdapter, vm: VM) -> bool:
    """Delete one VM; a refusal (it is still being created, say) is logged and tried again on
    the next sweep, without stopping this one."""
    try:
        await delete_urgently(adapter, vm.id)
    except ProviderError as exc:
        log.info("%s VM %s not deleted yet: %s", adapter.provider, vm.id, exc.message)
        return False
    return True


def _may_belong_to(provider: Provider, vm: VM, recorded: list[Attempt]) -> str:
    """`; it may be ...` naming the attempts without a VM of their own that could have made it."""
    unowned = [
        view(a)
        for a in recorded
        if (a.status.is_open or a.status is AttemptStatus.NOT_CREATED) and not a.provider_vm_id
    ]
    owners = possible_owners(vm, unowned, finds_vms_by_name=spec_for(provider).finds_vms_by_name)
    if not owners:
        return ""
    shown = ", ".join(f"attempt {a.number} of {a.order_id} ({a.status})" for a in owners[-5:])
    return f"; it may be what this create made: {shown}"


def _created_after(vm: VM, moment: datetime) -> bool:
    # Providers give creation times to the second: round up rather than call a VM old early.
    return vm.created_at is not None and vm.created_at + TIMESTAMP_PRECISION > moment
