"""The event stream's store: timeline lines published in commit order, and read back by id.

Writers of timeline lines and account events do nothing more than before; `publish_pending`
(run by every replica's publisher, one at a time) copies the lines not yet published into
`published_events`, where ids grow in commit order (see PublishedEvent), each event also
numbered in its account's own sequence, the id its readers see. The payload is
rendered then, with the order as it is at publication, a fraction of a second after the line.
"""

import json
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, delete, exists, func, insert, literal, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.clock import utcnow
from app.core.states import ORDER_EVENT_TYPES, ORDER_NOTE, OrderEventKind
from app.services.order_payload import OrderSnapshotOut
from app.services.orders import latest_attempts
from app.storage.models import AccountEvent, EventCounter, Order, OrderEvent, PublishedEvent

PUBLISH_BATCH = 200
# Any constant: publishers of every replica take this lock, so one publishes at a time.
_PUBLISH_LOCK = 0x6175746F70726F76  # "autoprov"


class Event(NamedTuple):
    """One published event: its id, whose it is, and the JSON every reader is sent."""

    id: int
    account_id: str
    type: str
    json: str


class _Line(NamedTuple):
    created_at: datetime
    source_id: str
    account_id: str
    order_id: str | None
    kind: str
    message: str


async def has_pending(session: AsyncSession) -> bool:
    """Whether any timeline line or account event waits to be published (a read only)."""
    pending = select(
        exists().where(OrderEvent.published.is_(False))
        | exists().where(AccountEvent.published.is_(False))
    )
    return bool(await session.scalar(pending))


async def publish_pending(session: AsyncSession, *, limit: int = PUBLISH_BATCH) -> int:
    """Publish the oldest lines not yet published, in time order; how many were published.

    On PostgreSQL another replica publishing right now makes this return 0 at once.
    """
    if session.get_bind().dialect.name == "postgresql":
        locked = await session.scalar(select(func.pg_try_advisory_xact_lock(_PUBLISH_LOCK)))
        if not locked:
            return 0
    lines = await _pending_lines(session, limit)
    if not lines:
        return 0
    order_ids = sorted({line.order_id for line in lines if line.order_id is not None})
    found = await session.execute(select(Order).where(Order.id.in_(order_ids)))
    orders = {order.id: order for order in found.scalars()}
    attempts = await latest_attempts(session, order_ids=order_ids)
    now = utcnow()
    rows = []
    for line in lines:
        order_json = None
        if line.order_id is not None:
            order = orders[line.order_id]
            snapshot = OrderSnapshotOut.present(order, attempts.get(order.id))
            order_json = snapshot.model_dump(mode="json")
        event_type = _event_type(line)
        rows.append(
            {
                "account_id": line.account_id,
                "order_id": line.order_id,
                "type": event_type,
                "source_id": line.source_id,
                "payload": _payload(line, event_type, order_json),
                "created_at": line.created_at,
                "published_at": now,
            }
        )
    await _number_per_account(session, rows)
    connection = await session.connection()
    # One executemany: the rows are inserted, and take their ids, in this list's order.
    await connection.execute(insert(PublishedEvent), rows)
    for model in (OrderEvent, AccountEvent):
        ids = [r["source_id"] for r in rows if (r["order_id"] is None) == (model is AccountEvent)]
        if ids:
            await connection.execute(update(model).where(model.id.in_(ids)).values(published=True))
    return len(rows)


async def _number_per_account(session: AsyncSession, rows: list[dict[str, Any]]) -> None:
    """Give each row its account's next `account_seq`, in the rows' order, and keep the count."""
    accounts = sorted({row["account_id"] for row in rows})
    found = await session.execute(
        select(EventCounter.account_id, EventCounter.last_seq).where(
            EventCounter.account_id.in_(accounts)
        )
    )
    known: dict[str, int] = dict(found.all())
    last = dict(known)
    for row in rows:
        row["account_seq"] = last[row["account_id"]] = last.get(row["account_id"], 0) + 1
    connection = await session.connection()
    new = [{"account_id": a, "last_seq": n} for a, n in last.items() if a not in known]
    if new:
        await connection.execute(insert(EventCounter), new)
    grown = [{"b_account": a, "b_last": n} for a, n in last.items() if a in known]
    if grown:
        statement = (
            update(EventCounter)
            .where(EventCounter.account_id == bindparam("b_account"))
            .values(last_seq=bindparam("b_last"))
        )
        await connection.execute(statement, grown)


async def _pending_lines(session: AsyncSession, limit: int) -> list[_Line]:
    order_lines = (
        await session.execute(
            select(
                OrderEvent.created_at,
                OrderEvent.id,
                Order.account_id,
                OrderEvent.order_id,
                OrderEvent.kind,
                OrderEvent.message,
            )
            .join(Order, Order.id == OrderEvent.order_id)
            .where(OrderEvent.published.is_(False))
            .order_by(OrderEvent.created_at, OrderEvent.id)
            .limit(limit)
        )
    ).all()
    account_lines = (
        await session.execute(
            select(
                AccountEvent.created_at,
                AccountEvent.id,
                AccountEvent.account_id,
                literal(None).label("order_id"),
                AccountEvent.kind,
                AccountEvent.message,
            )
            .where(AccountEvent.published.is_(False))
            .order_by(AccountEvent.created_at, AccountEvent.id)
            .limit(limit)
        )
    ).all()
    merged = sorted((_Line(*row) for row in (*order_lines, *account_lines)), key=_when)
    # A source cut at `limit` may have older lines than the other's last: stop where both
    # are complete, so lines are published in time order.
    cuts = [_when(_Line(*rows[-1])) for rows in (order_lines, account_lines) if len(rows) >= limit]
    if cuts:
        merged = [line for line in merged if _when(line) <= min(cuts)]
    return merged


def _when(line: _Line) -> tuple[datetime, str]:
    return (line.created_at, line.source_id)


def _event_type(line: _Line) -> str:
    if line.order_id is None:
        return f"account.{line.kind}"
    return ORDER_EVENT_TYPES.get(OrderEventKind(line.kind), ORDER_NOTE)


def _payload(line: _Line, event_type: str, order: dict[str, Any] | None) -> str:
    body = {
        "type": event_type,
        "kind": str(line.kind),
        "timestamp": line.created_at.isoformat().replace("+00:00", "Z"),
        "order_id": line.order_id,
        "message": line.message,
        "data": order,
    }
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def wire(event_id: int, payload: str) -> str:
    """The JSON a reader is sent: the payload with the event's id first."""
    return f'{{"id":{event_id},{payload[1:]}'


async def after(
    session: AsyncSession, *, account_id: str, after_id: int, limit: int
) -> list[Event]:
    """The account's events with ids (its own `account_seq`) above `after_id`, oldest first."""
    rows = await session.execute(
        select(PublishedEvent.account_seq, PublishedEvent.type, PublishedEvent.payload)
        .where(PublishedEvent.account_id == account_id, PublishedEvent.account_seq > after_id)
        .order_by(PublishedEvent.account_seq)
        .limit(limit)
    )
    return [Event(id_, account_id, type_, wire(id_, payload)) for id_, type_, payload in rows]


async def newest_id(session: AsyncSession) -> int:
    """The row id of the newest published event, of any account (0 when there is none): where
    the publisher starts looking for news. Readers are never shown it."""
    newest = await session.scalar(select(func.max(PublishedEvent.id)))
    return int(newest or 0)


async def newest_of(session: AsyncSession, *, account_id: str) -> int:
    """The highest id ever given to one of the account's events, pruned since or not (0
    before its first)."""
    given = await session.scalar(
        select(EventCounter.last_seq).where(EventCounter.account_id == account_id)
    )
    return int(given or 0)


async def newest_by_account(session: AsyncSession, *, after_id: int) -> dict[str, int]:
    """Accounts with events above `after_id`, each with the newest id."""
    rows = await session.execute(
        select(PublishedEvent.account_id, func.max(PublishedEvent.id))
        .where(PublishedEvent.id > after_id)
        .group_by(PublishedEvent.account_id)
    )
    return {account_id: int(newest) for account_id, newest in rows}


async def prune(session: AsyncSession, *, older_than: datetime) -> int:
    """Delete published events older than `older_than`; how many."""
    result = await session.execute(
        delete(PublishedEvent)
        .where(PublishedEvent.published_at < older_than)
        .execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0) or 0)
