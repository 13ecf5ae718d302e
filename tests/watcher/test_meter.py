"""The meter on a clock the test moves, both databases: a limit's terminate is asked for a tick
and a delete's time ahead of the limit, so the delete lands before the block after it begins."""

from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Provider
from app.core.states import OrderStatus
from app.providers.base import Offer
from app.services import billing
from app.storage.db import create_read_sessionmaker, create_sessionmaker, session_scope
from app.storage.models import Attempt, Order
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
