"""The money ledger: top-ups, holds for creates in flight, their release or debit.

Every change to an account's `balance` or `held` is one conditional UPDATE ... RETURNING on the
account row plus one ledger entry, in the caller's transaction. The condition is what keeps
`available = balance - held` from going below zero when many requests race: the database
re-checks it against the row as it is when the update runs, on SQLite and PostgreSQL alike.
"""

from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeVar, cast

from sqlalchemy import Connection, Table, bindparam, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.clock import utcnow
from app.core.errors import Conflict, InsufficientFunds, NotFound
from app.core.ids import new_id
from app.core.money import format_usd
from app.core.states import OPEN_ATTEMPTS, HoldStatus, LedgerKind
from app.core.text import quote
from app.services import account_events
from app.storage.models import Account, Attempt, Hold, LedgerEntry
from app.storage.types import Money, UTCDateTime

# Built once: on the deploy path, building and keying a statement costs more than running it.
_accounts = cast(Table, Account.__table__)
_ADJUST = (
    update(_accounts)
    .where(_accounts.c.id == bindparam("account_id"))
    .values(
        balance=_accounts.c.balance + bindparam("balance_delta", type_=Money()),
        held=_accounts.c.held + bindparam("held_delta", type_=Money()),
        updated_at=bindparam("now", type_=UTCDateTime()),
    )
    .returning(_accounts.c.balance, _accounts.c.held)
)
_ADJUST_IF_AVAILABLE = _ADJUST.where(
    _accounts.c.balance - _accounts.c.held >= bindparam("required", type_=Money())
)
_INSERT_ENTRY = insert(cast(Table, LedgerEntry.__table__))
_INSERT_HOLD = insert(cast(Table, Hold.__table__))
T = TypeVar("T")


async def _run(session: AsyncSession, work: Callable[..., T], **values: Any) -> T:
    """`work(connection, **values)` on the session's connection, in its transaction."""
    return await (await session.connection()).run_sync(work, **values)


def _change_account(
    connection: Connection,
    *,
    account_id: str,
    balance_delta: Decimal = Decimal(0),
    held_delta: Decimal = Decimal(0),
    require_available: Decimal | None = None,
) -> tuple[Decimal, Decimal] | None:
    """Apply deltas to one account; returns (balance, held) after, or None if the guard failed."""
    params = {
        "account_id": account_id,
        "balance_delta": balance_delta,
        "held_delta": held_delta,
        "now": utcnow(),
    }
    if require_available is None:
        statement = _ADJUST
    else:
        statement, params["required"] = _ADJUST_IF_AVAILABLE, require_available
    row = connection.execute(statement, params).first()
    return None if row is None else (row[0], row[1])


def _record(
    connection: Connection,
    *,
    account_id: str,
    kind: LedgerKind,
    amount: Decimal,
    after: tuple[Decimal, Decimal],
    hold: Hold | None = None,
    order_id: str | None = None,
    attempt_id: str | None = None,
    billing_hour: int | None = None,
    note: str | None = None,
) -> LedgerEntry:
    """Write one ledger entry (a plain INSERT: this sits on the deploy path) and return it."""
    entry = LedgerEntry(
        id=new_id("led"),
        account_id=account_id,
        kind=kind,
        amount=amount,
        balance_after=after[0],
        held_after=after[1],
        hold_id=hold.id if hold else None,
        order_id=order_id if order_id is not None else (hold.order_id if hold else None),
        attempt_id=attempt_id,
        billing_hour=billing_hour,
        note=note,
        created_at=utcnow(),
    )
    connection.execute(_INSERT_ENTRY, _columns(entry))
    return entry


def _columns(row: Any) -> dict[str, Any]:
    """A transient ORM object's column values, for a Core INSERT."""
    return {c.key: getattr(row, c.key) for c in row.__table__.columns}


async def available(session: AsyncSession, *, account_id: str) -> Decimal:
    """What the account can spend now: its balance less what it holds."""
    row = (
        await session.execute(select(Account.balance, Account.held).where(Account.id == account_id))
    ).one()
    return Decimal(row.balance) - Decimal(row.held)


async def credit(
    session: AsyncSession, *, account_id: str, amount: Decimal, note: str | None = None
) -> LedgerEntry:
    """Add money to an account (a top-up), and say so on its timeline (and event stream)."""
    entry = await _run(
        session, _add_money, account_id=account_id, amount=amount, kind=LedgerKind.TOPUP, note=note
    )
    account_events.add(
        session,
        account_id=account_id,
        kind="credited",
        message=f"{format_usd(amount)} added to the balance{f' ({note})' if note else ''}.",
    )
    return entry


async def refund(
    session: AsyncSession,
    *,
    account_id: str,
    amount: Decimal,
    order_id: str,
    attempt_id: str,
    note: str,
) -> LedgerEntry:
    """Give back money spent on one machine of an order (a VM that failed before it ran, or the
    unused part of its last hour); once per machine, which the database holds to."""
    return await _run(
        session,
        _add_money,
        account_id=account_id,
        amount=amount,
        kind=LedgerKind.REFUND,
        order_id=order_id,
        attempt_id=attempt_id,
        note=note,
    )


def _add_money(
    connection: Connection,
    *,
    account_id: str,
    amount: Decimal,
    kind: LedgerKind,
    order_id: str | None = None,
    attempt_id: str | None = None,
    note: str | None = None,
) -> LedgerEntry:
    after = _change_account(connection, account_id=account_id, balance_delta=amount)
    if after is None:
        raise NotFound(f"no account {quote(account_id)}")
    return _record(
        connection,
        account_id=account_id,
        kind=kind,
        amount=amount,
        after=after,
        order_id=order_id,
        attempt_id=attempt_id,
        note=note,
    )


async def place_hold(
    session: AsyncSession, *, account_id: str, amount: Decimal, order_id: str | None = None
) -> Hold:
    """Reserve `amount` of the account's available balance, or raise InsufficientFunds."""
    return await _run(
        session, place_hold_on, account_id=account_id, amount=amount, order_id=order_id
    )


def place_hold_on(
    connection: Connection, *, account_id: str, amount: Decimal, order_id: str | None = None
) -> Hold:
    """`place_hold` in a transaction of a synchronous connection (the claim's one hop)."""
    if amount <= 0:
        raise ValueError("a hold must be for a positive amount")
    after = _change_account(
        connection, account_id=account_id, held_delta=amount, require_available=amount
    )
    if after is None:
        if connection.execute(select(Account.id).where(Account.id == account_id)).first() is None:
            raise NotFound(f"no account {quote(account_id)}")
        raise InsufficientFunds(f"available balance does not cover {format_usd(amount)}")
    hold = Hold(
        id=new_id("hold"),
        account_id=account_id,
        order_id=order_id,
        amount=amount,
        status=HoldStatus.OPEN,
        created_at=utcnow(),
        closed_at=None,
    )
    connection.execute(_INSERT_HOLD, _columns(hold))
    _record(
        connection,
        account_id=account_id,
        kind=LedgerKind.HOLD,
        amount=amount,
        after=after,
        hold=hold,
    )
    return hold


async def release_hold(session: AsyncSession, *, hold_id: str) -> LedgerEntry:
    """Give a hold's amount back to the available balance; nothing is spent."""
    hold = await _close_hold(session, hold_id=hold_id, status=HoldStatus.RELEASED)
    after = await _run(
        session, _change_account, account_id=hold.account_id, held_delta=-hold.amount
    )
    assert after is not None  # the hold's account exists: foreign key
    return await _run(
        session,
        _record,
        account_id=hold.account_id,
        kind=LedgerKind.HOLD_RELEASE,
        amount=hold.amount,
        after=after,
        hold=hold,
    )


async def debit_hold(
    session: AsyncSession,
    *,
    hold_id: str,
    amount: Decimal | None = None,
    attempt_id: str | None = None,
    billing_hour: int | None = None,
) -> LedgerEntry:
    """Spend a hold: debit `amount` (default: all of it) and free the rest of it (the first
    billing hour of the machine `attempt_id`, when given)."""
    hold = await _close_hold(session, hold_id=hold_id, status=HoldStatus.DEBITED)
    spent = hold.amount if amount is None else amount
    if not Decimal(0) < spent <= hold.amount:
        raise ValueError(f"debit of {spent} does not fit a hold of {hold.amount}")
    after = await _run(
        session,
        _change_account,
        account_id=hold.account_id,
        balance_delta=-spent,
        held_delta=-hold.amount,
    )
    assert after is not None  # the hold's account exists: foreign key
    return await _run(
        session,
        _record,
        account_id=hold.account_id,
        kind=LedgerKind.DEBIT,
        amount=spent,
        after=after,
        hold=hold,
        attempt_id=attempt_id,
        billing_hour=billing_hour,
    )


async def debit_hour(
    session: AsyncSession,
    *,
    account_id: str,
    amount: Decimal,
    order_id: str,
    attempt_id: str,
    billing_hour: int,
) -> LedgerEntry | None:
    """Pay one billing hour of a machine from the available balance; None (nothing written)
    when the available balance does not cover it. A second payment of the same hour is refused
    by the database (IntegrityError): the caller's compare-and-set should have stopped it."""
    return await _run(
        session,
        _debit_available,
        account_id=account_id,
        amount=amount,
        order_id=order_id,
        attempt_id=attempt_id,
        billing_hour=billing_hour,
    )


def _debit_available(
    connection: Connection,
    *,
    account_id: str,
    amount: Decimal,
    order_id: str,
    attempt_id: str,
    billing_hour: int,
) -> LedgerEntry | None:
    after = _change_account(
        connection, account_id=account_id, balance_delta=-amount, require_available=amount
    )
    if after is None:
        return None
    return _record(
        connection,
        account_id=account_id,
        kind=LedgerKind.DEBIT,
        amount=amount,
        after=after,
        order_id=order_id,
        attempt_id=attempt_id,
        billing_hour=billing_hour,
        note=f"billing hour {billing_hour}",
    )


async def _close_hold(session: AsyncSession, *, hold_id: str, status: HoldStatus) -> Hold:
    """Move an open hold to `status` exactly once (compare-and-set), or raise."""
    closed = (
        await session.execute(
            update(Hold)
            .where(Hold.id == hold_id, Hold.status == HoldStatus.OPEN)
            .values(status=status, closed_at=utcnow())
            .returning(Hold.id)
            .execution_options(synchronize_session=False)
        )
    ).first()
    hold = await session.get(Hold, hold_id, populate_existing=True)
    if hold is None:
        raise NotFound(f"no hold {quote(hold_id)}")
    if closed is None:
        raise Conflict(f"hold {hold_id} is already {hold.status}")
    return hold


async def list_entries(
    session: AsyncSession, *, account_id: str, cursor: str | None, limit: int
) -> list[LedgerEntry]:
    """An account's ledger, newest first, starting after `cursor` (an entry id)."""
    statement = select(LedgerEntry).where(LedgerEntry.account_id == account_id)
    if cursor is not None:
        statement = statement.where(LedgerEntry.id < cursor)
    statement = statement.order_by(LedgerEntry.id.desc()).limit(limit)
    return list((await session.execute(statement)).scalars())


async def release_stray_holds(session: AsyncSession) -> list[str]:
    """Release open holds that no create attempt in flight stands behind; returns their ids.

    Claims write a hold and its attempt in one commit and every settle closes both, so this
    finds nothing unless something went wrong; it exists so that a hold can never stay open.
    """
    in_flight = select(Attempt.hold_id).where(
        Attempt.hold_id.is_not(None), Attempt.status.in_(OPEN_ATTEMPTS)
    )
    stray = (
        (
            await session.execute(
                select(Hold.id).where(Hold.status == HoldStatus.OPEN, Hold.id.not_in(in_flight))
            )
        )
        .scalars()
        .all()
    )
    for hold_id in stray:
        await release_hold(session, hold_id=hold_id)
    return list(stray)
