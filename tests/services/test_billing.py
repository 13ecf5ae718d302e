"""Paying as machines run, at the service layer on both databases: each billing hour paid once
(the database holds it), nothing written when it cannot be paid, one low-balance event per
crossing."""

import asyncio
from datetime import timedelta
from decimal import Decimal

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.core.catalogue import Provider
from app.core.clock import utcnow
from app.core.states import LedgerKind
from app.providers.base import Offer
from app.services import billing, ledger
from app.services.billing import Machine, Payment
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Account, AccountEvent, Attempt, LedgerEntry, Order
from tests.factories import running_machine

OFFER = Offer(Provider("hyperstack"), "CANADA-1", "n3-H100x1", "H100", 1, Decimal("30.00"))


async def running(engine: AsyncEngine) -> tuple[str, str]:
    """A machine running at $30/h for an account with $100 (so $70 left); (attempt, account)."""
    intent = await running_machine(engine, OFFER)
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await session.get(Order, intent.order_id)
        assert order is not None
        return intent.attempt_id, order.account_id


async def machine(engine: AsyncEngine) -> Machine:
    async with session_scope(create_sessionmaker(engine)) as session:
        (found,) = await billing.billed_machines(session)
    return found


async def debits(engine: AsyncEngine, attempt_id: str) -> list[int]:
    async with session_scope(create_sessionmaker(engine)) as session:
        rows = await session.execute(
            select(LedgerEntry.billing_hour).where(
                LedgerEntry.attempt_id == attempt_id, LedgerEntry.kind == LedgerKind.DEBIT
            )
        )
        return sorted(hour or 0 for (hour,) in rows)


async def test_the_database_refuses_a_second_payment_of_one_hour_and_a_second_refund(
    engine: AsyncEngine,
) -> None:
    attempt_id, account_id = await running(engine)
    insert = text(
        "INSERT INTO ledger_entries (id, account_id, kind, amount, balance_after, held_after, "
        "deployment_id, billing_hour, created_at) VALUES (:id, :account, :kind, 1000000, 0, 0, "
        ":deployment, :hour, CURRENT_TIMESTAMP)"
    )
    values = {"account": account_id, "deployment": attempt_id}
    with pytest.raises(IntegrityError):
        async with engine.begin() as connection:  # hour 1 was paid at deploy
            await connection.execute(insert, {**values, "id": "led_x1", "kind": "debit", "hour": 1})
    async with engine.begin() as connection:  # the control: another hour is fine, once
        await connection.execute(insert, {**values, "id": "led_x2", "kind": "debit", "hour": 2})
        await connection.execute(insert, {**values, "id": "led_x3", "kind": "refund", "hour": None})
    with pytest.raises(IntegrityError):
        async with engine.begin() as connection:
            await connection.execute(
                insert, {**values, "id": "led_x4", "kind": "refund", "hour": None}
            )


async def test_an_hour_is_paid_once_however_many_try_at_once(engine: AsyncEngine) -> None:
    attempt_id, _ = await running(engine)
    seen = await machine(engine)
    now = seen.paid_until + timedelta(seconds=1)

    async def pay() -> Payment:
        async with session_scope(create_sessionmaker(engine)) as session:
            return await billing.pay_next_hour(session, seen, now=now)

    outcomes = await asyncio.gather(pay(), pay(), pay())
    assert sorted(o.value for o in outcomes) == ["moved", "moved", "paid"]
    assert await debits(engine, attempt_id) == [1, 2]
    after = await machine(engine)
    assert (after.paid_hours, after.charged) == (2, Decimal("60.00"))


async def test_an_hour_the_balance_cannot_pay_writes_nothing_and_is_said_once(
    engine: AsyncEngine,
) -> None:
    attempt_id, account_id = await running(engine)
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:  # $70 left: hours 2 and 3 are paid
        for _ in range(2):
            paid = await billing.pay_next_hour(session, await _fresh(session), now=utcnow())
            assert paid is Payment.PAID
    seen = await machine(engine)
    async with session_scope(maker) as session:
        assert await billing.pay_next_hour(session, seen, now=utcnow()) is Payment.UNPAYABLE
        grace = seen.paid_until + timedelta(minutes=10)
        assert await billing.mark_unpaid(session, seen, grace_ends=grace)
        assert not await billing.mark_unpaid(session, seen, grace_ends=grace)  # once
    assert await debits(engine, attempt_id) == [1, 2, 3]
    async with session_scope(maker) as session:
        account = await session.get(Account, account_id)
        assert account is not None and account.balance == Decimal("10.00")
        marked = await session.scalar(
            select(func.count()).select_from(Attempt).where(Attempt.unpaid_since.is_not(None))
        )
        assert marked == 1
        # A top-up pays the hour, and the mark goes.
        await ledger.credit(session, account_id=account_id, amount=Decimal(50))
    async with session_scope(maker) as session:
        paid = await billing.pay_next_hour(session, await _fresh(session), now=utcnow())
        assert paid is Payment.PAID
    assert (await machine(engine)).unpaid_since is None


async def _fresh(session: AsyncSession) -> Machine:
    (found,) = await billing.billed_machines(session)
    return found


async def test_a_runway_below_the_threshold_is_told_once_per_crossing(
    engine: AsyncEngine,
) -> None:
    _, account_id = await running(engine)  # $70 pays 2.33 h of $30/h
    maker = create_sessionmaker(engine)

    async def told(threshold: float) -> list[str]:
        async with session_scope(maker) as session:
            return await billing.mark_low_balances(session, now=utcnow(), threshold_hours=threshold)

    assert await told(2) == []  # not below
    assert await told(3) == [account_id]
    assert await told(3) == []  # still below: not again
    async with session_scope(maker) as session:
        await ledger.credit(session, account_id=account_id, amount=Decimal(100))
    assert await told(3) == []  # above again: unmarked, nothing said
    async with session_scope(maker) as session:
        account = await session.get(Account, account_id)
        assert account is not None and account.low_balance_since is None
    assert await told(10) == [account_id]  # the next crossing is told
    async with session_scope(maker) as session:
        kinds = (await session.execute(select(AccountEvent.kind))).scalars().all()
    assert kinds.count("low_balance") == 2


async def settled_at(engine: AsyncEngine, attempt_id: str, past_paid: timedelta) -> billing.Settled:
    """Settle the machine as if it ended `past_paid` after its paid time (negative: before)."""
    async with session_scope(create_sessionmaker(engine)) as session:
        attempt = await session.get(Attempt, attempt_id)
        assert attempt is not None and attempt.billed_from is not None
        paid_until = attempt.billed_from + timedelta(
            seconds=attempt.paid_hours * attempt.billing_hour_seconds
        )
        return await billing.settle_end(session, attempt, ended_at=paid_until + past_paid)


async def balance_of(engine: AsyncEngine, account_id: str) -> Decimal:
    async with session_scope(create_sessionmaker(engine)) as session:
        account = await session.get(Account, account_id)
        assert account is not None
        return Decimal(account.balance)


@pytest.mark.parametrize(
    ("past_paid", "refunded", "overrun"),
    [
        (timedelta(minutes=-30), Decimal("15.00"), Decimal(0)),  # the control: half unused
        (timedelta(seconds=-1), Decimal(0), Decimal(0)),  # the last minute begun: used
        (timedelta(seconds=0.3), Decimal(0), Decimal("0.50")),  # one minute past: $30/60
        (timedelta(seconds=90), Decimal(0), Decimal("1.00")),  # two minutes begun past
    ],
)
async def test_a_block_begun_after_the_paid_hours_is_debited_at_settle(
    engine: AsyncEngine, past_paid: timedelta, refunded: Decimal, overrun: Decimal
) -> None:
    """Hyperstack bills each minute begun: a machine that ends 0.3 s after its paid hour (a
    terminate in the meter's lag) costs its provider a minute nobody paid for, unless the
    account pays it at settle, as the next hour's debit."""
    attempt_id, account_id = await running(engine)
    settled = await settled_at(engine, attempt_id, past_paid)
    assert (settled.refunded, settled.overrun, settled.unpaid) == (refunded, overrun, Decimal(0))
    assert settled.charged == Decimal("30.00") - refunded + overrun
    assert await balance_of(engine, account_id) == Decimal("70.00") + refunded - overrun
    assert await debits(engine, attempt_id) == ([1, 2] if overrun else [1])


async def test_what_the_balance_cannot_pay_of_the_overrun_is_said_not_taken(
    engine: AsyncEngine,
) -> None:
    attempt_id, account_id = await running(engine)
    async with session_scope(create_sessionmaker(engine)) as session:
        account = await session.get(Account, account_id)
        assert account is not None
        account.balance = Decimal("0.20")  # what is left after spending elsewhere
    settled = await settled_at(engine, attempt_id, timedelta(seconds=30))
    assert (settled.overrun, settled.unpaid) == (Decimal("0.20"), Decimal("0.30"))
    assert await balance_of(engine, account_id) == Decimal(0)
    assert "$0.30 of that time was more than its balance" in billing.overrun_said(settled)


async def test_the_overrun_debit_keeps_within_the_orders_total_limit(
    engine: AsyncEngine,
) -> None:
    attempt_id, _ = await running(engine)
    async with session_scope(create_sessionmaker(engine)) as session:
        attempt = await session.get(Attempt, attempt_id)
        assert attempt is not None
        order = await session.get(Order, attempt.order_id)
        assert order is not None
        order.max_total_usd = Decimal("30.10")  # $30 paid: 10 cents of room
    settled = await settled_at(engine, attempt_id, timedelta(seconds=30))
    assert (settled.overrun, settled.unpaid, settled.charged) == (
        Decimal("0.10"),
        Decimal("0.40"),
        Decimal("30.10"),
    )


async def test_the_unpaid_grace_is_never_charged(engine: AsyncEngine) -> None:
    """The control of the overrun debit: a machine in its grace (its next hour unpaid) that
    ends past its paid time pays nothing more."""
    attempt_id, account_id = await running(engine)
    async with session_scope(create_sessionmaker(engine)) as session:
        attempt = await session.get(Attempt, attempt_id)
        assert attempt is not None
        attempt.unpaid_since = utcnow()
    settled = await settled_at(engine, attempt_id, timedelta(minutes=5))
    assert (settled.refunded, settled.overrun, settled.unpaid) == (Decimal(0),) * 3
    assert await balance_of(engine, account_id) == Decimal("70.00")
