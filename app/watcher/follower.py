"""After the create: follow VMs to running, resolve unclear creates, expire old orders."""

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.catalogue import Provider
from app.core.market import ENDED_VM_STATES
from app.core.states import FOLLOWED_ATTEMPTS, AttemptStatus, OrderEventKind
from app.core.text import quote
from app.providers.base import VM, Offer, ProviderAdapter, ProviderError, VMState, delete_urgently
from app.providers.registry import display_name, spec_for, vm_named
from app.services import attempts, timeline
from app.services.limits import format_time
from app.services.timeline import Line
from app.settings import ProviderSettings
from app.storage.db import session_scope
from app.storage.models import Attempt
from app.support.metrics import (
    BOOT_DEADLINES_MISSED,
    DEPLOY_TO_RUNNING_SECONDS,
    UNKNOWN_VM_STATUSES,
)
from app.watcher import adoption
from app.watcher.context import WatcherContext
from app.watcher.scripts import delete_startup_script

log = logging.getLogger(__name__)
# For a provider the follower was given no deadline for: `ProviderSettings`' default.
_DEFAULT_BOOT_DEADLINE = ProviderSettings.model_fields["boot_deadline_minutes"]
DEFAULT_BOOT_DEADLINE_SECONDS: float = 60 * _DEFAULT_BOOT_DEADLINE.default


class Follower:
    """One tick: every attempt that is not settled yet is looked at once."""

    def __init__(
        self,
        context: WatcherContext,
        *,
        outcome_check_seconds: float,
        create_timeout_seconds: float,
        in_flight: Callable[[], set[str]],
        on_settled: Callable[[], None],
        cluster_assembly_seconds: float = 15 * 60.0,
        boot_deadlines: Mapping[Provider, float] | None = None,
    ) -> None:
        self.context = context
        self.outcome_check = timedelta(seconds=outcome_check_seconds)
        self.create_timeout = timedelta(seconds=create_timeout_seconds)
        self.cluster_assembly = timedelta(seconds=cluster_assembly_seconds)
        # Seconds a single machine has to run after its accepted create, by provider.
        self.boot_deadlines = dict(boot_deadlines or {})
        self._taking_apart: dict[str, str] = {}  # attempt id -> why its cluster is taken apart
        self.in_flight = in_flight
        self.on_settled = on_settled
        # Compared with the attempts' stored times, which the database rows take from utcnow.

    async def tick(self) -> None:
        """Look at every attempt not settled yet: follow it to running, or resolve it."""
        async with session_scope(self.context.read_sessionmaker) as session:
            open_attempts = await attempts.attempts_in(session, statuses=FOLLOWED_ATTEMPTS)
        by_provider: dict[str, list[Attempt]] = defaultdict(list)
        for attempt in open_attempts:
            by_provider[attempt.provider].append(attempt)
        await asyncio.gather(*(self._follow(p, items) for p, items in by_provider.items()))

    async def _follow(self, provider: str, open_attempts: list[Attempt]) -> None:
        adapter = self.context.adapters.get(Provider(provider))
        if adapter is None:
            return  # no credentials for it now; the attempts wait for a process that has them
        # One provider at a time, in order: kind to its rate limits.
        for attempt in open_attempts:
            try:
                await self._follow_one(adapter, attempt)
            except ProviderError as exc:
                log.info("following %s: %s", attempt.id, exc)

    async def _follow_one(self, adapter: ProviderAdapter, attempt: Attempt) -> None:
        now = self.context.clock()
        age = now - attempt.created_at
        if attempt.status == AttemptStatus.DEPLOYED and attempt.provider_vm_id:
            await self._check_vm(adapter, attempt)
        elif attempt.status == AttemptStatus.UNKNOWN and (
            now - attempt.updated_at >= self.outcome_check
        ):
            # The consistency window runs from when the answer was given up on (updated_at),
            # not from the create: a provider may make the VM late, after our timeout.
            await self._resolve(adapter, attempt)
        elif (
            attempt.status == AttemptStatus.CREATING
            and attempt.id not in self.in_flight()
            and age >= self.create_timeout
        ):
            # Past the create timeout no process can still be waiting on this create (ours
            # would have it in flight): it was cut off by a crash or a lost lease.
            async with session_scope(self.context.sessionmaker) as session:
                await attempts.mark_unknown(
                    session,
                    attempt_id=attempt.id,
                    message="The create's answer was never recorded (the service stopped?)",
                )

    async def _check_vm(self, adapter: ProviderAdapter, attempt: Attempt) -> None:
        assert attempt.provider_vm_id is not None
        vm = await adapter.get_vm(attempt.provider_vm_id)
        name = display_name(adapter.provider)
        # Said as first found: once some nodes are deleted, fewer are listed.
        unassembled = self._taking_apart.get(attempt.id) or self._unassembled(attempt, vm)
        if unassembled is not None:
            self._taking_apart[attempt.id] = unassembled
            # All or nothing: every node made is deleted, the hour refunded, the order waits.
            if vm is not None:
                await delete_urgently(adapter, vm.id)
            async with session_scope(self.context.sessionmaker) as session:
                await attempts.settle_failed_before_running(
                    session, attempt_id=attempt.id, reason=unassembled
                )
            del self._taking_apart[attempt.id]
            return
        if vm is not None and vm.state is VMState.RUNNING and vm.ip:
            async with session_scope(self.context.sessionmaker) as session:
                settled = await attempts.settle_running(
                    session, attempt_id=attempt.id, vm=vm, now=self.context.clock()
                )
            if settled:
                booted = (self.context.clock() - attempt.created_at).total_seconds()
                DEPLOY_TO_RUNNING_SECONDS.labels(attempt.provider).observe(booted)
            return
        late = self._late(attempt, vm)
        if vm is not None and vm.state is VMState.UNKNOWN:
            UNKNOWN_VM_STATUSES.labels(attempt.provider).inc()
            if late is None:
                await self._note_unknown_status(attempt, vm)
        if vm is not None and vm.state in (VMState.FAILED, VMState.SUSPENDED):
            await delete_urgently(adapter, vm.id)
            reason = f"{name} failed the VM before it ran ({vm.provider_status})"
        elif vm is None or vm.state is VMState.GONE:
            reason = f"{name} lost the VM before it ran"
        elif late is not None:
            await self._delete_late(adapter, attempt, vm, late)
            reason = late
        else:
            return  # still booting (or a status we do not know: wait, until the deadline)
        async with session_scope(self.context.sessionmaker) as session:
            settled = await attempts.settle_failed_before_running(
                session, attempt_id=attempt.id, reason=reason
            )
        if settled and reason == late:
            BOOT_DEADLINES_MISSED.labels(attempt.provider).inc()
            log.warning("%s: deleted (order %s)", late, attempt.order_id)
        if vm is None or vm.state is VMState.GONE:  # else the reconciler's, once it is gone
            await delete_startup_script(adapter, attempt.vm_name)

    def _deadline(self, attempt: Attempt) -> datetime:
        """When a deployed single machine must run by: its provider's boot deadline after the
        accepted create. A deployed attempt's `updated_at` is when it was accepted (or its VM
        found by a look-up): nothing else moves it until the attempt settles."""
        return attempt.updated_at + timedelta(seconds=self._boot_seconds(attempt.provider))

    def _boot_seconds(self, provider: str) -> float:
        return self.boot_deadlines.get(Provider(provider), DEFAULT_BOOT_DEADLINE_SECONDS)

    def _late(self, attempt: Attempt, vm: VM | None) -> str | None:
        """Why a single machine is deleted for not running in time, or None while it may."""
        if attempt.nodes > 1 or self.context.clock() < self._deadline(attempt):
            return None  # a cluster's nodes have the assembly deadline, or none
        minutes = self._boot_seconds(attempt.provider) / 60
        last = f" (it was {quote(vm.provider_status)})" if vm is not None else ""
        return (
            f"{display_name(attempt.provider)}'s VM was not running {minutes:g} minutes after "
            f"the create was accepted{last}"
        )

    async def _note_unknown_status(self, attempt: Attempt, vm: VM) -> None:
        """Say once per status that the provider shows the VM in one we do not know."""
        until = (
            f" until {format_time(self._deadline(attempt))}; if it does not, it is deleted and "
            "refunded"
            if attempt.nodes == 1
            else ""
        )
        message = (
            f"{display_name(attempt.provider)} shows {vm_named(vm.id)} in a status this service "
            f"does not know ({quote(vm.provider_status)}): waiting for it to run{until}."
        )
        async with session_scope(self.context.sessionmaker) as session:
            noted = await attempts.note_not_running(
                session, attempt_id=attempt.id, kind=OrderEventKind.STATUS_UNKNOWN, message=message
            )
        if noted:
            log.warning("%s (order %s)", message, attempt.order_id)

    async def _delete_late(
        self, adapter: ProviderAdapter, attempt: Attempt, vm: VM, late: str
    ) -> None:
        """Delete a machine past its boot deadline; a refusal (it still boots, at Verda and
        Hyperstack) is said once and raised, so the delete is sent again next tick."""
        try:
            await delete_urgently(adapter, vm.id)
        except ProviderError as exc:
            message = (
                f"{late}: deleting it; {display_name(attempt.provider)} did not take the delete "
                f"yet ({exc.message[:200]}), so it is sent again until it does, unless the VM "
                "runs first."
            )
            async with session_scope(self.context.sessionmaker) as session:
                noted = await attempts.note_not_running(
                    session,
                    attempt_id=attempt.id,
                    kind=OrderEventKind.DELETE_RETRY,
                    message=message,
                )
            if noted:
                log.warning("%s (order %s)", message, attempt.order_id)
            raise

    def _unassembled(self, attempt: Attempt, vm: VM | None) -> str | None:
        """Why a cluster made of single VMs will not come together, or None: fewer nodes than
        ordered, a node that ended before all ran, or not all running in time."""
        shapes = spec_for(attempt.provider).clusters
        if vm is None or attempt.nodes < 2 or shapes is None or not shapes.assembled:
            return None
        name = display_name(attempt.provider)
        if len(vm.machines) < attempt.nodes:
            return f"{name} made {len(vm.machines)} of the cluster's {attempt.nodes} nodes"
        ended = [m for m in vm.machines if m.state in ENDED_VM_STATES]
        if ended:
            said = ", ".join(f"{m.id} {m.provider_status}" for m in ended)
            return (
                f"{name} ended {len(ended)} of the cluster's {attempt.nodes} nodes before "
                f"all ran ({said})"
            )
        # Past the deadline it is taken apart even if it runs by now: a node still being made
        # refuses deletes (Hyperstack), so the first delete may only be taken once it runs.
        if self.context.clock() - attempt.created_at >= self.cluster_assembly:
            minutes = self.cluster_assembly.total_seconds() / 60
            return (
                f"The cluster's {attempt.nodes} nodes were not all running {minutes:g} minutes "
                "after the creates"
            )
        return None

    async def _resolve(self, adapter: ProviderAdapter, attempt: Attempt) -> None:
        """Look up the VM an unclear create may have made: adopt it, release the order, or
        wait while another attempt could have made the same VM (see `adoption`)."""
        provider = adapter.provider
        offer = Offer(
            provider=provider,
            region=attempt.region,
            sku=attempt.sku,
            gpu_model=attempt.gpu_model,
            gpu_count=attempt.gpu_count,
            price_per_hour=attempt.price_per_hour,
            offer_id=attempt.offer_id,
            nodes=attempt.nodes,  # a cluster is looked up among clusters (Verda's)
        )
        found = await adapter.find_vms(
            name=attempt.vm_name,
            tag=attempt.tag,
            offer=offer,
            not_before=attempt.created_at,
        )
        # Read after the listing: an attempt that settles in between owns its VM by now.
        async with session_scope(self.context.sessionmaker) as session:
            others = await attempts.ownership_at(session, provider=str(provider))
            decision = adoption.decide(
                adoption.view(attempt),
                found,
                owned={d.provider_vm_id for d in others if d.provider_vm_id},
                rivals=[adoption.view(d) for d in others if d.status.is_open],
                finds_vms_by_name=spec_for(provider).finds_vms_by_name,
            )
            if isinstance(decision, adoption.Wait):
                await attempts.note_unresolved(
                    session, attempt_id=attempt.id, message=decision.reason
                )
                return
            if isinstance(decision, adoption.NotCreated):
                await attempts.settle_not_created(
                    session,
                    attempt_id=attempt.id,
                    kind=OrderEventKind.NOT_CREATED,
                    message=f"Looked it up at {display_name(provider)}: no VM came of the "
                    "create; keeps waiting.",
                )
            elif not await self._adopt(session, attempt, decision):
                return  # looked at again next tick, with that VM owned
        if isinstance(decision, adoption.NotCreated):  # committed: nor may its script stay
            await delete_startup_script(adapter, attempt.vm_name)
        self.on_settled()

    async def _adopt(
        self, session: AsyncSession, attempt: Attempt, decision: adoption.Adopt
    ) -> bool:
        """Settle the attempt with the VM its unclear create made; False when that VM is
        another attempt's by now."""
        try:
            adopted = await attempts.settle_created(session, attempt_id=attempt.id, vm=decision.vm)
        except attempts.VMAlreadyOwned:
            log.warning("%s VM %s is another order's by now", attempt.provider, decision.vm.id)
            return False
        if adopted:
            others_note = (
                f" ({', '.join(vm.id for vm in decision.others)} could have been too, "
                "and are reported as owned by no order)"
                if decision.others
                else ""
            )
            await timeline.write(
                session,
                Line(
                    attempt.order_id,
                    OrderEventKind.ADOPTED,
                    f"Found the VM the unclear create made ({decision.vm.id}): it is this "
                    f"order's{others_note}.",
                ),
            )
        return True
