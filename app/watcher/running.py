"""Watches running VMs at a low rate: one whose provider shows it gone, failed, suspended or
being deleted (we did not ask) ends its order as `lost`, billing stopped when it was seen."""

import asyncio
import logging
from collections import defaultdict

from app.core.catalogue import Provider
from app.core.market import ENDED_VM_STATES
from app.core.states import AttemptStatus
from app.providers.base import VM, ProviderAdapter, ProviderError, VMState, delete_urgently
from app.services import attempts, cluster_nodes, terminations
from app.storage.db import session_scope
from app.storage.models import Attempt
from app.watcher.context import WatcherContext
from app.watcher.scripts import delete_startup_script

log = logging.getLogger(__name__)
STILL_THERE = frozenset({VMState.FAILED, VMState.SUSPENDED})  # deleted after they are lost


class RunningWatch:
    """One tick: every provider with running VMs is listed once (a look-up for any missing)."""

    def __init__(self, context: WatcherContext) -> None:
        self.context = context

    async def tick(self) -> None:
        """Read every running VM's status; end the orders of those the provider ended."""
        async with session_scope(self.context.read_sessionmaker) as session:
            running = await attempts.attempts_in(session, statuses=(AttemptStatus.RUNNING,))
        by_provider: dict[str, list[Attempt]] = defaultdict(list)
        for attempt in running:
            by_provider[attempt.provider].append(attempt)
        await asyncio.gather(*(self._provider(p, items) for p, items in by_provider.items()))

    async def _provider(self, provider: str, running: list[Attempt]) -> None:
        adapter = self.context.adapters.get(Provider(provider))
        if adapter is None:
            return
        try:
            listed = {vm.id: vm for vm in await adapter.list_vms()}
        except ProviderError as exc:
            log.info("watching %s's running VMs: %s", provider, exc)
            return
        for attempt in running:
            try:
                await self._check(adapter, attempt, listed.get(attempt.provider_vm_id or ""))
            except ProviderError as exc:
                log.info("watching %s: %s", attempt.id, exc)

    async def _check(self, adapter: ProviderAdapter, attempt: Attempt, vm: VM | None) -> None:
        assert attempt.provider_vm_id is not None  # a running attempt recorded its VM
        if vm is None:  # not in the list: a list may lag, the VM's own answer does not
            vm = await adapter.get_vm(attempt.provider_vm_id)
        if vm is not None and vm.state not in ENDED_VM_STATES:
            if vm.machines:
                await self._nodes(attempt, vm)
            return
        reported = "not found" if vm is None else vm.provider_status
        async with session_scope(self.context.sessionmaker) as session:
            ended = await terminations.settle_lost(
                session, attempt_id=attempt.id, seen_at=self.context.clock(), reported=reported
            )
        if ended is not None:
            log.warning("%s ended VM %s (%s)", adapter.provider, attempt.provider_vm_id, reported)
            if vm is not None and vm.state in STILL_THERE:
                await delete_urgently(adapter, vm.id)  # best effort: the reconciler deletes it too
        if vm is None or vm.state is VMState.GONE:  # else the reconciler's, once it is gone
            await delete_startup_script(adapter, attempt.vm_name)

    async def _nodes(self, attempt: Attempt, vm: VM) -> None:
        """A cluster that runs: its nodes as reported, and what a lost one does."""
        async with session_scope(self.context.sessionmaker) as session:
            lost = await cluster_nodes.note_machines(
                session, attempt_id=attempt.id, vm=vm, now=self.context.clock()
            )
        if lost is not None:
            log.warning(
                "%s lost nodes %s of %s's cluster%s",
                attempt.provider,
                ", ".join(lost.lost),
                lost.order_id,
                ": terminating it" if lost.terminating else "",
            )
