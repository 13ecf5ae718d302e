"""Paying as machines run: each tick, every billed machine whose next hour has begun pays it, or
gets its grace, or is terminated: unpaid past the grace, or at the limits its order sets. Then
accounts whose runway fell below the threshold are told once."""

import dataclasses
import logging
from collections.abc import Callable
from datetime import timedelta

from app.core import metering
from app.core.errors import Conflict
from app.core.states import TerminateReason
from app.services import billing, terminations
from app.services.billing import Machine, Payment
from app.storage.db import session_scope
from app.watcher.context import WatcherContext

log = logging.getLogger(__name__)
# Hours paid for one machine in one tick at most: after a long stop of the service a machine
# catches up over a few ticks instead of holding this one.
MAX_HOURS_PER_TICK = 24


class Meter:
    """Debits billing hours as they begin; terminates machines at their limits or unpaid."""

    def __init__(
        self,
        context: WatcherContext,
        *,
        grace_minutes: float,
        low_balance_hours: float,
        on_terminate: Callable[[], None],
        lead: Callable[[str], timedelta] = lambda _provider: timedelta(0),
    ) -> None:
        self.context = context
        # How far ahead of a limit its terminate is asked for at a provider: a tick and a
        # delete's answer, so the delete lands before the block after the limit begins.
        self.lead = lead
        self.grace_minutes = grace_minutes
        self.low_balance_hours = low_balance_hours
        self.on_terminate = on_terminate

    async def tick(self) -> None:
        """Bill every machine that bills now, then mark accounts whose runway ran low."""
        async with session_scope(self.context.read_sessionmaker) as session:
            machines = await billing.billed_machines(session)
        terminated = False
        for machine in machines:
            try:
                terminated |= await self._bill(machine)
            except Exception:
                log.exception("billing %s failed", machine.attempt_id)
        async with session_scope(self.context.sessionmaker) as session:
            await billing.mark_low_balances(
                session, now=self.context.clock(), threshold_hours=self.low_balance_hours
            )
        if terminated:
            self.on_terminate()

    def grace(self, machine: Machine) -> timedelta:
        """The grace, in the machine's billed time (minutes of its billing hour)."""
        return timedelta(seconds=self.grace_minutes * 60 * machine.hour_seconds / 3600)

    async def _bill(self, machine: Machine) -> bool:
        """Pay what is due of one machine; True if it was terminated."""
        for _ in range(MAX_HOURS_PER_TICK):
            now = self.context.clock()
            end = metering.terminates_at(
                billed_from=machine.billed_from,
                hour_seconds=machine.hour_seconds,
                price_per_hour=machine.price,
                max_runtime_hours=machine.max_runtime_hours,
                max_total=machine.max_total_usd,
            )
            if end is not None and now + self.lead(machine.provider) >= end[0]:
                return await self._terminate(machine, TerminateReason(end[1]))
            if machine.paid_until > now:
                return False
            grace_ends = machine.paid_until + self.grace(machine)
            async with session_scope(self.context.sessionmaker) as session:
                payment = await billing.pay_next_hour(session, machine, now=now)
                if payment is Payment.UNPAYABLE and now < grace_ends:
                    await billing.mark_unpaid(session, machine, grace_ends=grace_ends)
            if payment is Payment.UNPAYABLE and now >= grace_ends:
                # Also when no tick came in its grace: it ran unpaid all the same.
                return await self._terminate(machine, TerminateReason.UNPAID, ran_unpaid=True)
            if payment is not Payment.PAID:
                return False
            machine = dataclasses.replace(
                machine,
                paid_hours=machine.paid_hours + 1,
                charged=machine.charged + machine.price,
                unpaid_since=None,
            )
        return False

    async def _terminate(
        self, machine: Machine, reason: TerminateReason, *, ran_unpaid: bool = False
    ) -> bool:
        async with session_scope(self.context.sessionmaker) as session:
            if ran_unpaid:
                await billing.ran_unpaid(session, machine)
            try:
                await terminations.request(
                    session,
                    order_id=machine.order_id,
                    account_id=None,
                    reason=reason,
                    now=self.context.clock(),
                )
            except Conflict:
                return False  # it ended meanwhile
        log.info("terminating %s: %s", machine.order_id, reason)
        return True
