"""A property-based state machine over a machine's life after the deploy: billing hours, limits,
terminates, refused deletes, crashes mid-delete, providers ending VMs and top-ups, with the
money and ownership promises checked after every step.

The real services run on an SQLite file of their own for each example, with the real meter,
terminator and running watch; the providers are `FakeAdapter`s named Hyperstack (billed per
minute from running) and QuantaCloud (per hour begun, from the accepted create), so their
billing units apply; time is a wall clock the machine moves (billing hours of 60 s, the grace
10 s of them). A "crash" is a delete the provider took whose outcome no process recorded, and
every in-memory part built anew, as a restarted process has it.

Promises, after every step:
- no billing hour is paid twice, and the hours paid are 1..paid_hours without a gap;
- right after a meter tick, every billed machine is paid up to now, or unpaid within its grace,
  or being terminated (none is missed while it runs);
- each machine is refunded at most once; what its attempt says it was charged is its debits
  less its refunds; the account's ledger sums to its balance, which is never below zero;
- no VM runs (or boots) at a provider without an attempt that owns it (deployed, running or
  terminating);
- a terminated machine paid what its provider's rounding gives for the time it billed: the
  unused part refunded, a block begun past its paid hours debited (as far as the balance
  went), the unpaid grace free.
"""

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import ClassVar, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import Connection, select

from app.core import metering
from app.core.catalogue import Provider
from app.core.errors import AppError
from app.core.states import AttemptStatus, LedgerKind, OrderStatus, TerminateReason
from app.providers.base import Offer, ProviderAdapter, Unavailable, VMState
from app.providers.fake import FakeAdapter
from app.providers.registry import spec_for
from app.services import accounts, attempts, claims, ledger, placing, terminations
from app.services.claims import Intent
from app.services.order_request import NewAlternative, NewOrder
from app.storage.db import (
    create_engine,
    create_read_sessionmaker,
    create_sessionmaker,
    session_scope,
)
from app.storage.models import Account, Attempt, LedgerEntry, Order
from app.watcher.context import WatcherContext
from app.watcher.meter import Meter
from app.watcher.running import RunningWatch
from app.watcher.terminator import Terminator
from tests.clock import FakeWallClock

# Slow: hundreds of generated runs, each a lifecycle of its own.
pytestmark = pytest.mark.slow

T = TypeVar("T")
HOUR = 60.0
GRACE_MINUTES = 10.0  # 10 s of a 60 s hour
START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
PRICES = {"hyperstack": Decimal("2.62"), "quantacloud": Decimal("2.68")}
OFFERS = {
    name: Offer(Provider(name), "R-1", f"{name}-h100", "H100", 1, price)
    for name, price in PRICES.items()
}
ORDERS = 3
MAX_EXAMPLES = 40
STEPS = 50


class LifecycleMachine(RuleBasedStateMachine):
    """The money and ownership of running machines under random time, work and failures."""

    template: ClassVar[Path]

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.dir = Path(tempfile.mkdtemp())
        shutil.copyfile(self.template, self.dir / "db.sqlite")
        self.engine = create_engine(f"sqlite+aiosqlite:///{self.dir / 'db.sqlite'}")
        self.maker = create_sessionmaker(self.engine)
        self.reader = create_read_sessionmaker(self.engine)
        self.clock = FakeWallClock(START)
        self.fakes = {
            Provider("hyperstack"): FakeAdapter(Provider("hyperstack")),
            Provider("quantacloud"): FakeAdapter(Provider("quantacloud"), finds_vms_by_name=False),
        }
        self.order_ids: list[str] = []
        self.account_id = ""
        self.metered_at: datetime | None = None
        self.restart()

    def run(self, work: Awaitable[T]) -> T:
        return self.loop.run_until_complete(work)

    def restart(self) -> None:
        """Every in-memory part anew, as a restarted process builds them."""
        adapters: dict[Provider, ProviderAdapter] = dict(self.fakes)
        self.meter = Meter(
            WatcherContext(
                adapters={},
                sessionmaker=self.maker,
                read_sessionmaker=self.reader,
                clock=self.clock,
            ),
            grace_minutes=GRACE_MINUTES,
            low_balance_hours=2,
            on_terminate=lambda: None,
        )
        self.terminator = Terminator(
            WatcherContext(
                adapters=adapters,
                sessionmaker=self.maker,
                read_sessionmaker=self.reader,
                clock=self.clock,
            ),
        )
        self.watch = RunningWatch(
            WatcherContext(
                adapters=adapters,
                sessionmaker=self.maker,
                read_sessionmaker=self.reader,
                clock=self.clock,
            ),
        )

    def teardown(self) -> None:
        self.run(self.engine.dispose())
        self.loop.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- setup -----------------------------------------------------------------------------

    @initialize(
        credit=st.sampled_from([Decimal("6"), Decimal("20"), Decimal("200")]),
        where=st.lists(st.sampled_from(sorted(PRICES)), min_size=ORDERS, max_size=ORDERS),
        runtimes=st.lists(
            st.sampled_from([None, None, Decimal("1.5"), Decimal("3")]),
            min_size=ORDERS,
            max_size=ORDERS,
        ),
    )
    def deploy(self, credit: Decimal, where: list[str], runtimes: list[Decimal | None]) -> None:
        """One account, three machines deployed and running (or booting at QuantaCloud)."""
        self.run(self._deploy(credit, where, runtimes))

    async def _deploy(
        self, credit: Decimal, where: list[str], runtimes: list[Decimal | None]
    ) -> None:
        async with session_scope(self.maker) as session:
            account, _ = await accounts.create_account(session, name="machine")
            await ledger.credit(session, account_id=account.id, amount=credit)
            self.account_id = account.id
        for provider, runtime in zip(where, runtimes, strict=True):
            offer = OFFERS[provider]
            async with session_scope(self.maker) as session:
                order = await placing.place_order(
                    session,
                    account_id=self.account_id,
                    request=NewOrder(
                        (NewAlternative("H100", 1, [provider], Decimal("3.00")),),
                        max_runtime_hours=runtime,
                    ),
                    enabled=set(PRICES),
                    max_waiting=100,
                )
            intent = await self._claim(order.id, offer)
            if intent is None:
                continue  # the account cannot pay another first hour: it keeps waiting
            fake = self.fakes[offer.provider]
            vm = await fake.create_vm(
                offer, name=intent.vm_name, tag=intent.tag, ssh_public_key=None
            )
            async with session_scope(self.maker) as session:
                await attempts.settle_created(
                    session, attempt_id=intent.attempt_id, vm=vm, now=self.clock()
                )
            self.order_ids.append(order.id)
            if provider == "hyperstack":  # QuantaCloud's stay booting: billed from the create
                running = fake.advance(vm.id, VMState.RUNNING, ip="192.0.2.10")
                async with session_scope(self.maker) as session:
                    await attempts.settle_running(
                        session, attempt_id=intent.attempt_id, vm=running, now=self.clock()
                    )

    async def _claim(self, order_id: str, offer: Offer) -> Intent | None:
        def claim(sync: Connection) -> Intent | None:
            return claims.claim_on(
                sync,
                order_id=order_id,
                offer=offer,
                price_with_fees=offer.price_per_hour,
                billing_hour_seconds=HOUR,
            )

        try:  # a claim the balance cannot pay is rolled back whole, as the deployer's is
            async with session_scope(self.maker) as session:
                return await (await session.connection()).run_sync(claim)
        except AppError:
            return None

    # --- rules -----------------------------------------------------------------------------

    @rule(seconds=st.floats(min_value=0.5, max_value=90), metered=st.booleans())
    def time_passes(self, seconds: float, metered: bool) -> None:
        """Time passes; the meter ticks then, as it does every few seconds (or, now and then,
        not: the service was down)."""
        self.clock.advance(seconds)
        self.metered_at = None
        if metered:
            self.meter_ticks()

    @rule()
    def meter_ticks(self) -> None:
        self.run(self.meter.tick())
        self.metered_at = self.clock()

    @rule(index=st.integers(0, ORDERS - 1))
    def terminate(self, index: int) -> None:
        if index >= len(self.order_ids):
            return
        self.run(self._terminate(self.order_ids[index]))

    async def _terminate(self, order_id: str) -> None:
        async with session_scope(self.maker) as session:
            with contextlib.suppress(AppError):  # it ended meanwhile (lost): a 409, nothing written
                await terminations.request(
                    session,
                    order_id=order_id,
                    account_id=self.account_id,
                    reason=TerminateReason.REQUESTED,
                    now=self.clock(),
                )

    @rule()
    def terminator_ticks(self) -> None:
        self.run(self.terminator.tick())

    @rule(provider=st.sampled_from(sorted(PRICES)))
    def the_next_delete_is_refused(self, provider: str) -> None:
        self.fakes[Provider(provider)].fail_deletes(Unavailable)

    @rule(index=st.integers(0, ORDERS - 1), state=st.sampled_from(
        [VMState.GONE, VMState.FAILED, VMState.SUSPENDED]))  # fmt: skip
    def the_provider_ends_a_vm(self, index: int, state: VMState) -> None:
        vm = self._vm_of(index)
        if vm is not None:
            fake, vm_id = vm
            if fake.vms[vm_id].state is not VMState.GONE:
                fake.advance(vm_id, state)

    @rule()
    def running_vms_are_read(self) -> None:
        self.run(self.watch.tick())

    @rule(index=st.integers(0, ORDERS - 1))
    def crash_after_a_delete_was_taken(self, index: int) -> None:
        """The provider took a delete; the process died before recording anything."""
        vm = self._vm_of(index)
        status = self.run(self._order_status(index))
        if vm is not None and status is OrderStatus.TERMINATING:
            fake, vm_id = vm
            if not fake.delete_errors:
                self.run(fake.delete_vm(vm_id))
        self.restart()
        self.metered_at = None

    @rule(amount=st.sampled_from([Decimal("1"), Decimal("5"), Decimal("50")]))
    def top_up(self, amount: Decimal) -> None:
        self.run(self._credit(amount))

    async def _credit(self, amount: Decimal) -> None:
        async with session_scope(self.maker) as session:
            await ledger.credit(session, account_id=self.account_id, amount=amount)

    def _vm_of(self, index: int) -> tuple[FakeAdapter, str] | None:
        if index >= len(self.order_ids):
            return None
        attempt = self.run(self._attempt(self.order_ids[index]))
        if attempt is None or attempt.provider_vm_id is None:
            return None
        return self.fakes[Provider(attempt.provider)], attempt.provider_vm_id

    async def _attempt(self, order_id: str) -> Attempt | None:
        async with session_scope(self.reader) as session:
            found = await session.execute(select(Attempt).where(Attempt.order_id == order_id))
            return found.scalars().first()

    async def _order_status(self, index: int) -> OrderStatus | None:
        if index >= len(self.order_ids):
            return None
        async with session_scope(self.reader) as session:
            order = await session.get(Order, self.order_ids[index])
            return None if order is None else order.status

    # --- promises --------------------------------------------------------------------------

    async def _tables(self) -> tuple[list[Attempt], list[LedgerEntry], Account, list[Order]]:
        async with session_scope(self.reader) as session:
            found = list((await session.execute(select(Attempt))).scalars())
            entries = list((await session.execute(select(LedgerEntry))).scalars())
            account = await session.get(Account, self.account_id)
            placed = list((await session.execute(select(Order))).scalars())
        assert account is not None
        return found, entries, account, placed

    @invariant()
    def money_and_ownership_hold(self) -> None:
        if not self.account_id:
            return
        machines, entries, account, placed = self.run(self._tables())
        statuses = {o.id: o for o in placed}
        signs = {LedgerKind.TOPUP: 1, LedgerKind.REFUND: 1, LedgerKind.DEBIT: -1}
        total = sum((e.amount * signs.get(LedgerKind(e.kind), 0) for e in entries), Decimal(0))
        assert total == account.balance >= 0
        assert account.held == 0
        for machine in machines:
            mine = [e for e in entries if e.attempt_id == machine.id]
            hours = sorted(e.billing_hour or 0 for e in mine if e.kind == LedgerKind.DEBIT)
            # An ended machine may also have paid the block it began past its paid hours.
            overran = machine.ended_at is not None and hours[-1:] == [machine.paid_hours + 1]
            paid_hours = hours[:-1] if overran else hours
            assert paid_hours == list(range(1, machine.paid_hours + 1)), (machine.id, hours)
            refunds = [e.amount for e in mine if e.kind == LedgerKind.REFUND]
            assert len(refunds) <= 1
            paid = sum((e.amount for e in mine if e.kind == LedgerKind.DEBIT), Decimal(0))
            assert machine.charged == paid - sum(refunds, Decimal(0))
            order = statuses[machine.order_id]
            if machine.status is AttemptStatus.TERMINATED:
                assert order.status is OrderStatus.TERMINATED
                assert machine.ended_at is not None
                # What the provider's rounding gives for the time it billed, unless that time
                # ran past the paid hours: then the grace is free, and the rest is paid as far
                # as the balance went.
                price = machine.price_per_hour_with_fees
                used = metering.used_amount(
                    price,
                    metering.billed_seconds(machine.billed_from, machine.ended_at),
                    HOUR,
                    spec_for(machine.provider).billing,
                )
                whole = price * machine.paid_hours
                if used <= whole:
                    assert machine.charged == used, (machine.id, machine.charged, used)
                elif machine.unpaid_since is not None:
                    assert machine.charged == whole and not refunds
                else:
                    assert whole <= machine.charged <= used and not refunds
            if machine.status is AttemptStatus.LOST:
                assert order.status is OrderStatus.LOST
        owners = {(m.provider, m.provider_vm_id): m.status for m in machines}
        for fake in self.fakes.values():
            for vm in fake.vms.values():
                if vm.state in (VMState.RUNNING, VMState.PENDING):
                    owner = owners.get((str(fake.provider), vm.id))
                    assert owner is not None and owner.owns_vm, (vm, owner)

    @invariant()
    def no_hour_is_missed_after_a_meter_tick(self) -> None:
        if self.metered_at is None or self.metered_at != self.clock():
            return
        machines, _entries, _account, placed = self.run(self._tables())
        terminating = {o.id for o in placed if o.status is OrderStatus.TERMINATING}
        now = self.clock()
        for machine in machines:
            if machine.status not in (AttemptStatus.DEPLOYED, AttemptStatus.RUNNING):
                continue
            assert machine.billed_from is not None
            until = metering.paid_until(machine.billed_from, machine.paid_hours, HOUR)
            grace = timedelta(seconds=GRACE_MINUTES * 60 * HOUR / 3600)
            unpaid_in_grace = machine.unpaid_since is not None and now < until + grace
            assert until > now or unpaid_in_grace or machine.order_id in terminating, (
                machine.id,
                until,
                now,
            )


def test_paying_terminating_and_losing_machines_keep_every_promise(
    sqlite_template: Path,
) -> None:
    LifecycleMachine.template = sqlite_template
    run_state_machine_as_test(
        LifecycleMachine,
        settings=settings(
            max_examples=MAX_EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
