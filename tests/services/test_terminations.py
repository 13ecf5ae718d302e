"""The terminate protocol's database side on both databases: the intent before any delete, a
create still in flight adopted once it settles, and each end settled (and refunded) once."""

from decimal import Decimal

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Provider
from app.core.clock import utcnow
from app.core.errors import Conflict
from app.core.states import (
    AttemptStatus,
    LedgerKind,
    OrderEventKind,
    OrderStatus,
    TerminateReason,
)
from app.providers.base import VM, Offer, VMState
from app.services import attempts, terminations
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Attempt, LedgerEntry, Order
from tests.factories import claimed, waiting_orders

OFFER = Offer(Provider("hyperstack"), "CANADA-1", "n3-H100x1", "H100", 1, Decimal("30.00"))
VM_1 = VM(Provider("hyperstack"), "412001", VMState.RUNNING, "ACTIVE", ip="203.0.113.9")


async def state(engine: AsyncEngine, order_id: str) -> tuple[OrderStatus, AttemptStatus | None]:
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await session.get(Order, order_id)
        attempt = (
            await session.execute(select(Attempt).where(Attempt.order_id == order_id))
        ).scalar_one_or_none()
    assert order is not None
    return order.status, None if attempt is None else attempt.status


async def terminate(engine: AsyncEngine, order_id: str) -> Order:
    async with session_scope(create_sessionmaker(engine)) as session:
        return await terminations.request(
            session,
            order_id=order_id,
            account_id=None,
            reason=TerminateReason.REQUESTED,
            now=utcnow(),
        )


async def test_a_waiting_order_has_nothing_to_terminate(engine: AsyncEngine) -> None:
    (order_id,) = await waiting_orders(engine, OFFER)
    with pytest.raises(Conflict, match="cancel it instead"):
        await terminate(engine, order_id)
    assert await state(engine, order_id) == (OrderStatus.WAITING, None)


async def test_a_create_in_flight_is_adopted_once_it_settles(engine: AsyncEngine) -> None:
    (intent,) = await claimed(engine, OFFER)
    await terminate(engine, intent.order_id)
    # The intent is committed; the create is still open, so nothing can be deleted yet.
    assert await state(engine, intent.order_id) == (
        OrderStatus.TERMINATING,
        AttemptStatus.CREATING,
    )
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        assert await terminations.adopt(session, now=utcnow()) == []
        await attempts.settle_created(session, attempt_id=intent.attempt_id, vm=VM_1)
    assert await state(engine, intent.order_id) == (
        OrderStatus.TERMINATING,
        AttemptStatus.DEPLOYED,
    )
    async with session_scope(maker) as session:
        assert await terminations.adopt(session, now=utcnow()) == []
    assert await state(engine, intent.order_id) == (
        OrderStatus.TERMINATING,
        AttemptStatus.TERMINATING,
    )


async def test_a_create_that_made_nothing_ends_the_order_with_nothing_charged(
    engine: AsyncEngine,
) -> None:
    (intent,) = await claimed(engine, OFFER)
    await terminate(engine, intent.order_id)
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        await attempts.settle_not_created(
            session,
            attempt_id=intent.attempt_id,
            kind=OrderEventKind.NO_CAPACITY,
            message="gone",
        )
    async with session_scope(maker) as session:
        assert await terminations.adopt(session, now=utcnow()) == [intent.order_id]
    assert await state(engine, intent.order_id) == (
        OrderStatus.TERMINATED,
        AttemptStatus.NOT_CREATED,
    )
    async with session_scope(maker) as session:
        kinds = (await session.execute(select(LedgerEntry.kind))).scalars().all()
    assert "debit" not in kinds and kinds.count("hold_release") == 1


async def test_an_end_is_settled_and_refunded_once(engine: AsyncEngine) -> None:
    (intent,) = await claimed(engine, OFFER)
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        await attempts.settle_created(session, attempt_id=intent.attempt_id, vm=VM_1)
    async with session_scope(maker) as session:
        await attempts.settle_running(session, attempt_id=intent.attempt_id, vm=VM_1)
    await terminate(engine, intent.order_id)
    async with session_scope(maker) as session:
        ended = await terminations.settle_terminated(
            session, attempt_id=intent.attempt_id, now=utcnow()
        )
    assert ended is not None and ended.refunded == Decimal("29.50")  # one minute used of $30
    async with session_scope(maker) as session:
        again = await terminations.settle_terminated(
            session, attempt_id=intent.attempt_id, now=utcnow()
        )
        lost = await terminations.settle_lost(
            session, attempt_id=intent.attempt_id, seen_at=utcnow(), reported="gone"
        )
    assert (again, lost) == (None, None)
    async with session_scope(maker) as session:
        refunds = (
            (
                await session.execute(
                    select(LedgerEntry.amount).where(LedgerEntry.kind == LedgerKind.REFUND)
                )
            )
            .scalars()
            .all()
        )
    assert refunds == [Decimal("29.50")]
    assert await state(engine, intent.order_id) == (
        OrderStatus.TERMINATED,
        AttemptStatus.TERMINATED,
    )
