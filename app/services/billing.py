"""Paying as machines run (app/core/metering.py has the arithmetic): each billing hour debited as it
begins, the unused part of the last one refunded when the machine ends, and what each account's
machines cost an hour together (its spend, its runway, its low-balance mark).

A machine's hour k is paid by one compare-and-set on its attempt (`paid_hours` k-1 -> k) and one
ledger debit, in one transaction; a unique index on (attempt, hour) backs it, so no hour is paid
twice whatever crashes and replicas do.
"""

import logging
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import Enum

from sqlalchemy import ColumnElement, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core import metering
from app.core.money import format_money, format_usd
from app.core.states import AttemptStatus, OrderEventKind, WebhookEventType
from app.providers.registry import spec_for, vm_named
from app.services import account_events, ledger, timeline
from app.services.limits import format_time
from app.services.timeline import Line
from app.services.webhooks import outbox
from app.storage.models import Account, Attempt, Order

log = logging.getLogger(__name__)

# Attempts whose machine bills: accepted and not ended (a create accepted at a provider that
# bills from then on, or a VM that runs). Being deleted: no new hour is paid.
BILLED = (AttemptStatus.DEPLOYED, AttemptStatus.RUNNING)
LOW_BALANCE = "low_balance"


@dataclass(frozen=True)
class Machine:
    """A billed machine, as the meter decides about it."""

    attempt_id: str
    order_id: str
    account_id: str
    provider: str
    price: Decimal  # per hour, with fees, as deployed
    billed_from: datetime
    paid_hours: int
    hour_seconds: float
    unpaid_since: datetime | None
    charged: Decimal
    max_runtime_hours: Decimal | None
    max_total_usd: Decimal | None

    @property
    def paid_until(self) -> datetime:
        """The end of the last hour paid."""
        return metering.paid_until(self.billed_from, self.paid_hours, self.hour_seconds)


async def billed_machines(session: AsyncSession) -> list[Machine]:
    """Every machine that bills now, oldest first."""
    rows = await session.execute(
        select(Attempt, Order)
        .join(Order, Order.id == Attempt.order_id)
        .where(Attempt.status.in_(BILLED), Attempt.billed_from.is_not(None))
        .order_by(Attempt.created_at, Attempt.id)
    )
    machines = []
    for attempt, order in rows:
        assert attempt.billed_from is not None  # the query's condition
        machines.append(
            Machine(
                attempt_id=attempt.id,
                order_id=order.id,
                account_id=order.account_id,
                provider=attempt.provider,
                price=attempt.price_per_hour_with_fees,
                billed_from=attempt.billed_from,
                paid_hours=attempt.paid_hours,
                hour_seconds=attempt.billing_hour_seconds,
                unpaid_since=attempt.unpaid_since,
                charged=attempt.charged,
                max_runtime_hours=order.max_runtime_hours,
                max_total_usd=order.max_total_usd,
            )
        )
    return machines


class Payment(Enum):
    """What trying to pay a machine's next hour came to."""

    PAID = "paid"
    UNPAYABLE = "unpayable"  # the available balance does not cover it: nothing written
    MOVED = "moved"  # paid already, or the machine stopped billing meanwhile: nothing written


class _Unpayable(Exception):
    pass


def _as_seen(machine: Machine) -> tuple[ColumnElement[bool], ...]:
    """The attempt still billed and paid as `machine` saw it: a write that another made first
    (a second meter, an end) finds nothing."""
    return (
        Attempt.id == machine.attempt_id,
        Attempt.status.in_(BILLED),
        Attempt.paid_hours == machine.paid_hours,
    )


async def pay_next_hour(session: AsyncSession, machine: Machine, *, now: datetime) -> Payment:
    """Debit the machine's next billing hour from its account's available balance."""
    hour = machine.paid_hours + 1
    try:
        async with session.begin_nested():
            moved = (
                await session.execute(
                    update(Attempt)
                    .where(*_as_seen(machine))
                    .values(
                        paid_hours=hour,
                        charged=Attempt.charged + machine.price,
                        unpaid_since=None,
                    )
                    .returning(Attempt.id)
                    .execution_options(synchronize_session=False)
                )
            ).first()
            if moved is None:
                return Payment.MOVED
            entry = await ledger.debit_hour(
                session,
                account_id=machine.account_id,
                amount=machine.price,
                order_id=machine.order_id,
                attempt_id=machine.attempt_id,
                billing_hour=hour,
            )
            if entry is None:
                raise _Unpayable
    except _Unpayable:
        return Payment.UNPAYABLE
    until = metering.paid_until(machine.billed_from, hour, machine.hour_seconds)
    late = " (within the grace: the grace is part of it)" if machine.unpaid_since else ""
    await timeline.write(
        session,
        Line(
            machine.order_id,
            OrderEventKind.BILLED,
            f"Billing hour {hour} paid ({format_usd(machine.price)}){late}; paid until "
            f"{format_time(until)}.",
        ),
    )
    return Payment.PAID


async def mark_unpaid(session: AsyncSession, machine: Machine, *, grace_ends: datetime) -> bool:
    """The next hour could not be paid: the grace runs from its start. Said once per hour."""
    if not await ran_unpaid(session, machine):
        return False
    account = await session.get(Account, machine.account_id, populate_existing=True)
    assert account is not None  # foreign key
    available = account.balance - account.held
    await timeline.write(
        session,
        Line(
            machine.order_id,
            OrderEventKind.UNPAID,
            f"Billing hour {machine.paid_hours + 1} ({format_usd(machine.price)}) could not be "
            f"paid: {format_usd(available)} available. Top up by {format_time(grace_ends)} or "
            "the machine is terminated.",
        ),
    )
    return True


async def ran_unpaid(session: AsyncSession, machine: Machine) -> bool:
    """Record that the machine runs unpaid from the end of its paid hours (unless recorded);
    its end then settles as a machine's in its grace. True if this recorded it."""
    moved = (
        await session.execute(
            update(Attempt)
            .where(*_as_seen(machine), Attempt.unpaid_since.is_(None))
            .values(unpaid_since=machine.paid_until)
            .returning(Attempt.id)
            .execution_options(synchronize_session=False)
        )
    ).first()
    return moved is not None


@dataclass(frozen=True)
class Settled:
    """A machine's money once it ended: what came back, what it cost in all, and what of the
    time it ran past its paid hours was debited now (`overrun`) or could not be (`unpaid`)."""

    refunded: Decimal
    charged: Decimal
    overrun: Decimal = Decimal(0)
    unpaid: Decimal = Decimal(0)


async def settle_end(session: AsyncSession, attempt: Attempt, *, ended_at: datetime) -> Settled:
    """Square the account with what the provider billed, rounded the way it bills: the paid
    time the machine did not use comes back, and a block it began after its paid hours (a
    terminate in the meter's lag, a crash, deletes that kept failing) is debited as the next
    hour, as far as the available balance and the order's `max_total_usd` go (the rest is the
    operator's, and said). The
    unpaid grace stays free: time past the paid hours of a machine in its grace is not charged."""
    unit = spec_for(attempt.provider).billing
    price, seconds = attempt.price_per_hour_with_fees, attempt.billing_hour_seconds
    used = metering.used_amount(
        price, metering.billed_seconds(attempt.billed_from, ended_at), seconds, unit
    )
    paid = price * attempt.paid_hours
    if used <= paid or attempt.unpaid_since is not None:
        return await _refund_unused(session, attempt, max(Decimal(0), paid - used))
    account_id, limit = (
        await session.execute(
            select(Order.account_id, Order.max_total_usd).where(Order.id == attempt.order_id)
        )
    ).one()
    owed = used - paid
    payable = await ledger.available(session, account_id=account_id)
    if limit is not None:  # a spend limit holds here too: what is past it is not the user's
        payable = min(payable, limit - attempt.charged)
    overrun = min(owed, max(payable, Decimal(0)))
    if overrun > 0:
        paid_now = await ledger.debit_hour(
            session,
            account_id=account_id,
            amount=overrun,
            order_id=attempt.order_id,
            attempt_id=attempt.id,
            billing_hour=attempt.paid_hours + 1,
        )
        overrun = overrun if paid_now is not None else Decimal(0)
    if overrun > 0:
        await session.execute(
            update(Attempt)
            .where(Attempt.id == attempt.id)
            .values(charged=Attempt.charged + overrun)
            .execution_options(synchronize_session=False)
        )
    if owed > overrun:
        log.warning(
            "%s ran %s past its paid hours that its account could not pay",
            attempt.id,
            format_usd(owed - overrun),
        )
    return Settled(Decimal(0), attempt.charged + overrun, overrun, owed - overrun)


async def _refund_unused(session: AsyncSession, attempt: Attempt, unused: Decimal) -> Settled:
    """Refund the paid blocks the machine did not use (once: the database holds it)."""
    if unused > 0:
        await ledger.refund(
            session,
            account_id=await _account_of(session, attempt),
            amount=unused,
            order_id=attempt.order_id,
            attempt_id=attempt.id,
            note=f"unused part of what was paid for {vm_named(attempt.provider_vm_id)}",
        )
        await session.execute(
            update(Attempt)
            .where(Attempt.id == attempt.id)
            .values(charged=Attempt.charged - unused)
            .execution_options(synchronize_session=False)
        )
    return Settled(unused, attempt.charged - unused)


async def _account_of(session: AsyncSession, attempt: Attempt) -> str:
    account_id = await session.scalar(select(Order.account_id).where(Order.id == attempt.order_id))
    assert account_id is not None  # foreign key
    return account_id


def overrun_said(settled: Settled) -> str:
    """What a timeline's end line adds about time run past the paid hours, if any."""
    said = ""
    if settled.overrun > 0:
        said += (
            f" It ran past its paid hours, and its provider bills the block begun: "
            f"{format_usd(settled.overrun)} debited for it."
        )
    if settled.unpaid > 0:
        said += (
            f" {format_usd(settled.unpaid)} of that time was more than its balance or its "
            "limit allowed, and is not charged."
        )
    return said


async def spend_by_account(
    session: AsyncSession, *, account_ids: list[str] | None = None
) -> dict[str, Decimal]:
    """What each account's machines (accepted, not ended) cost an hour together."""
    machines = await machines_by_account(session, account_ids=account_ids)
    return {account_id: spend for account_id, (_count, spend) in machines.items()}


async def machines_by_account(
    session: AsyncSession, *, account_ids: list[str] | None = None
) -> dict[str, tuple[int, Decimal]]:
    """How many machines (accepted, not ended) each account has, and what they cost an hour."""
    statement = (
        select(Order.account_id, func.count(), func.sum(Attempt.price_per_hour_with_fees))
        .join(Order, Order.id == Attempt.order_id)
        .where(Attempt.status.in_(BILLED))
        .group_by(Order.account_id)
    )
    if account_ids is not None:
        statement = statement.where(Order.account_id.in_(account_ids))
    rows = await session.execute(statement)
    return {account_id: (count, Decimal(total)) for account_id, count, total in rows}


async def mark_low_balances(
    session: AsyncSession, *, now: datetime, threshold_hours: float
) -> list[str]:
    """Accounts whose runway just fell below `threshold_hours` get one `account.low_balance`
    event each (and are marked); marked ones back above it (or with nothing running) are
    unmarked. Returns the accounts told."""
    spend = await spend_by_account(session)
    accounts = (
        await session.execute(
            select(Account).where(
                or_(Account.id.in_(list(spend)), Account.low_balance_since.is_not(None))
            )
        )
    ).scalars()
    told = []
    for account in accounts:
        hourly = spend.get(account.id, Decimal(0))
        available = account.balance - account.held
        runway = metering.runway_hours(available, hourly)
        low = metering.is_low_balance(available, hourly, threshold_hours)
        if low == (account.low_balance_since is not None):
            continue
        await session.execute(
            update(Account)
            .where(Account.id == account.id)
            .values(low_balance_since=now if low else None)
            .execution_options(synchronize_session=False)
        )
        if low:
            told.append(account.id)
            account_events.add(
                session,
                account_id=account.id,
                kind=LOW_BALANCE,
                message=f"Low balance: {format_usd(account.balance - account.held)} available "
                f"pays {runway} h of the machines running ({format_usd(hourly)}/h). Top up, "
                "or they are terminated when an hour cannot be paid.",
            )
            await outbox.emit_account(
                session,
                account_id=account.id,
                event_type=WebhookEventType.ACCOUNT_LOW_BALANCE,
                data={
                    "id": account.id,
                    "name": account.name,
                    "available": format_money(account.balance - account.held),
                    "hourly_spend": format_money(hourly),
                    "runway_hours": str(runway),
                },
            )
    await session.flush()
    return told
