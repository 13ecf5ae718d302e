"""The meter on a clock the test moves, both databases: a limit's terminate is asked for a tick
and a delete's time ahead of the limit, so the delete lands before the block after it begins."""

from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core import metering
from app.core.catalogue import Provider
from app.core.money import format_usd
from app.core.states import OrderStatus
from app.providers.base import Offer
from app.services import account_events, accounts, billing, orders
from app.storage.db import create_read_sessionmaker, create_sessionmaker, session_scope
from app.storage.models import Attempt, LedgerEntry, Order
from app.watcher.context import WatcherContext
from app.watcher.meter import Meter
from tests.clock import FakeWallClock
from tests.factories import running_machine

OFFER = Offer(Provider("hyperstack"), "CANADA-1", "n3-H100x1", "H100", 1, Decimal("30.00"))
LEAD = timedelta(seconds=0.5)


async def limited_machine(engine: AsyncEngine, clock: FakeWallClock) -> tuple[str, datetime]:
    """A running machine whose order may run one billed hour; (order id, its limit's time)."""
    intent = await running_machine(engine, OFFER)
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        await session.execute(
            update(Order).where(Order.id == intent.order_id).values(max_runtime_hours=1)
        )
    async with session_scope(maker) as session:
        (machine,) = await billing.billed_machines(session)
    clock.set(machine.billed_from)
    return intent.order_id, machine.billed_from + timedelta(seconds=machine.hour_seconds)


def meter_on(engine: AsyncEngine, clock: FakeWallClock, *, lead: timedelta) -> Meter:
    """A meter with a 10-minute grace, asking for Hyperstack's deletes `lead` ahead."""
    return Meter(
        WatcherContext(
            adapters={},
            sessionmaker=create_sessionmaker(engine),
            read_sessionmaker=create_read_sessionmaker(engine),
            clock=clock,
        ),
        grace_minutes=10,
        low_balance_hours=2,
        on_terminate=lambda: None,
        lead=lambda provider: lead if provider == "hyperstack" else timedelta(0),
    )


async def status(engine: AsyncEngine, order_id: str) -> OrderStatus:
    async with session_scope(create_sessionmaker(engine)) as session:
        found = await session.scalar(select(Order.status).where(Order.id == order_id))
    assert found is not None
    return OrderStatus(found)


async def test_a_limit_is_acted_on_a_lead_ahead_of_it(engine: AsyncEngine) -> None:
    clock = FakeWallClock()
    order_id, limit = await limited_machine(engine, clock)
    meter = meter_on(engine, clock, lead=LEAD)
    clock.set(limit - LEAD - timedelta(seconds=0.1))  # the control: not yet
    await meter.tick()
    assert await status(engine, order_id) is OrderStatus.RUNNING
    clock.set(limit - LEAD + timedelta(seconds=0.1))
    await meter.tick()
    assert await status(engine, order_id) is OrderStatus.TERMINATING


async def test_a_machine_first_found_unpayable_past_its_grace_is_ended_as_having_run_unpaid(
    engine: AsyncEngine,
) -> None:
    """No tick came in the grace (the lease moved, the service was down): the machine is ended
    at once, and it is recorded as having run unpaid from its paid hours' end, as a machine
    told in its grace is, so its end settles the same way."""
    clock = FakeWallClock()
    intent = await running_machine(engine, OFFER)  # $100 at $30 an hour: three hours paid
    meter = meter_on(engine, clock, lead=timedelta(0))
    maker = create_sessionmaker(engine)
    for _ in range(2):
        async with session_scope(maker) as session:
            (machine,) = await billing.billed_machines(session)
        clock.set(machine.paid_until)
        await meter.tick()
    async with session_scope(maker) as session:
        (machine,) = await billing.billed_machines(session)
    assert machine.paid_hours == 3  # the control: the meter paid what the balance could
    clock.set(machine.paid_until + meter.grace(machine) + timedelta(seconds=1))
    await meter.tick()
    async with session_scope(maker) as session:
        order = await session.get(Order, intent.order_id)
        attempt = await session.get(Attempt, intent.attempt_id)
    assert order is not None and attempt is not None
    assert (order.status, order.terminate_reason) == (OrderStatus.TERMINATING, "unpaid")
    assert attempt.unpaid_since == machine.paid_until


# Moved from the real-clock lifecycle tests (tests/watcher/test_lifecycle.py keeps one end to
# end test per provider per rule family): the same assertions, on a clock the test moves.


async def the_machine(engine: AsyncEngine) -> billing.Machine:
    async with session_scope(create_sessionmaker(engine)) as session:
        (machine,) = await billing.billed_machines(session)
    return machine


async def debits(engine: AsyncEngine, account_id: str) -> list[Decimal]:
    """The amounts of the account's debits, oldest first."""
    async with session_scope(create_sessionmaker(engine)) as session:
        rows = await session.scalars(
            select(LedgerEntry.amount)
            .where(LedgerEntry.account_id == account_id, LedgerEntry.kind == "debit")
            .order_by(LedgerEntry.created_at)
        )
        return list(rows)


async def order_row(engine: AsyncEngine, order_id: str) -> Order:
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await session.get(Order, order_id)
    assert order is not None
    return order


async def test_each_hour_is_debited_once_as_it_begins_never_ahead(engine: AsyncEngine) -> None:
    clock = FakeWallClock()
    intent = await running_machine(engine, OFFER)  # $100 at $30 an hour: hour 1 paid at once
    meter = meter_on(engine, clock, lead=timedelta(0))
    machine = await the_machine(engine)
    hour = timedelta(seconds=machine.hour_seconds)
    for begun in (2, 3):
        begins = machine.billed_from + (begun - 1) * hour
        clock.set(begins - timedelta(milliseconds=1))  # the control: a moment before it begins
        await meter.tick()
        assert len(await debits(engine, machine.account_id)) == begun - 1
        clock.set(begins)
        await meter.tick()
        await meter.tick()  # a second tick in the same hour pays nothing more
        assert await debits(engine, machine.account_id) == [machine.price] * begun
    assert (await order_row(engine, intent.order_id)).status is OrderStatus.RUNNING


async def test_max_total_terminates_before_an_hour_would_pass_it(engine: AsyncEngine) -> None:
    clock = FakeWallClock()
    intent = await running_machine(engine, OFFER)
    machine = await the_machine(engine)
    total = machine.price * Decimal("2.5")  # two hours fit, a third would not
    async with session_scope(create_sessionmaker(engine)) as session:
        await session.execute(
            update(Order).where(Order.id == intent.order_id).values(max_total_usd=total)
        )
    meter = meter_on(engine, clock, lead=timedelta(0))
    hour = timedelta(seconds=machine.hour_seconds)
    clock.set(machine.billed_from + hour)
    await meter.tick()
    assert await status(engine, intent.order_id) is OrderStatus.RUNNING  # the control
    clock.set(machine.billed_from + 2 * hour)
    await meter.tick()
    order = await order_row(engine, intent.order_id)
    assert (order.status, order.terminate_reason) == (OrderStatus.TERMINATING, "max_total")
    assert await debits(engine, machine.account_id) == [machine.price] * 2  # the two that fit
    async with session_scope(create_sessionmaker(engine)) as session:
        attempt = await session.get(Attempt, intent.attempt_id)
    assert attempt is not None and attempt.charged <= total


async def test_a_limit_set_while_it_runs_applies(engine: AsyncEngine) -> None:
    clock = FakeWallClock()
    intent = await running_machine(engine, OFFER)
    machine = await the_machine(engine)
    meter = meter_on(engine, clock, lead=timedelta(0))
    hour = timedelta(seconds=machine.hour_seconds)
    clock.set(machine.billed_from + hour / 2)
    await meter.tick()
    assert await status(engine, intent.order_id) is OrderStatus.RUNNING  # the control: no limit
    async with session_scope(create_sessionmaker(engine)) as session:
        changed = await orders.update_limits(
            session,
            account_id=machine.account_id,
            order_id=intent.order_id,
            changes={"max_runtime_hours": Decimal("0.75")},
        )
        assert changed.max_runtime_hours == Decimal("0.75")
    clock.set(machine.billed_from + hour * 3 / 4)
    await meter.tick()
    order = await order_row(engine, intent.order_id)
    assert (order.status, order.terminate_reason) == (OrderStatus.TERMINATING, "max_runtime")


async def test_the_account_is_told_once_when_its_runway_runs_low(engine: AsyncEngine) -> None:
    clock = FakeWallClock()
    await running_machine(engine, OFFER)  # $100 at $30 an hour
    machine = await the_machine(engine)
    meter = meter_on(engine, clock, lead=timedelta(0))  # low below 2 hours

    async def runway_and_told() -> tuple[Decimal | None, bool, list[str]]:
        async with session_scope(create_sessionmaker(engine)) as session:
            account = await accounts.get_account(session, account_id=machine.account_id)
            spend = (await billing.spend_by_account(session))[machine.account_id]
            told = await account_events.list_events(
                session, account_id=machine.account_id, cursor=None, limit=100
            )
        runway = metering.runway_hours(account.balance - account.held, spend)
        low = account.low_balance_since is not None
        return runway, low, [e.message for e in told if e.kind == "low_balance"]

    await meter.tick()
    assert await runway_and_told() == (Decimal("2.33"), False, [])  # $70 left, not below two
    clock.set(machine.billed_from + timedelta(seconds=machine.hour_seconds))
    await meter.tick()  # hour 2 paid: $40 left
    runway, low, told = await runway_and_told()
    assert (runway, low, len(told)) == (Decimal("1.33"), True, 1)
    assert format_usd(machine.price) in told[0]
    await meter.tick()
    assert len((await runway_and_told())[2]) == 1  # one event per crossing
