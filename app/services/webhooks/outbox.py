"""The webhook outbox: events written with the change they report, and their deliveries.

`emit` runs inside the transaction that changes an order, so an event exists exactly when the
change committed. Each delivery (event x endpoint) is then claimed with a lease, sent, and its
attempt recorded; a dispatcher that dies mid-send leaves a lease that runs out, and the
delivery is sent again with the same webhook-id: a duplicate is possible, a gap is not.
"""

import json
import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Select, delete, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.clock import utcnow
from app.core.ids import new_id
from app.core.states import DeliveryStatus, WebhookEventType, WebhookFormat
from app.services.order_payload import OrderSnapshotOut
from app.services.webhooks import endpoint_health
from app.services.webhooks.doorbell import ring_after_commit
from app.storage.models import (
    Attempt,
    Order,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)

JITTER = 0.2  # each retry delay is moved by up to this fraction either way
MAX_RETRY_AFTER_SECONDS = 86_400.0
DUE_SCAN_LIMIT = 500


async def emit(session: AsyncSession, *, order_id: str, event_type: WebhookEventType) -> None:
    """Write an order event and a delivery per subscribed endpoint, in the caller's transaction."""
    # One query when the account has no endpoint, as most do: this runs in the watcher's commits.
    endpoints = (
        await session.execute(
            select(WebhookEndpoint.id, WebhookEndpoint.events)
            .join(Order, Order.account_id == WebhookEndpoint.account_id)
            .where(Order.id == order_id, WebhookEndpoint.enabled.is_(True))
        )
    ).all()
    targets = _subscribed(endpoints, event_type)
    if not targets:
        return
    # The snapshot re-reads the order and its attempt from the database: what the caller has
    # changed on them and not flushed yet (sessions do not autoflush) is written first, or the
    # re-read would put the old values back (an attempt's `billed_from`, lost that way, left
    # machines running on one paid hour).
    await session.flush()
    order = await session.get(Order, order_id, populate_existing=True)
    assert order is not None  # it was joined just above
    attempt = (
        await session.execute(
            select(Attempt)
            .where(Attempt.order_id == order_id)
            .order_by(Attempt.number.desc())
            .limit(1)
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()
    data = OrderSnapshotOut.present(order, attempt).model_dump(mode="json")
    await _write(session, order.account_id, order_id, event_type, data, targets)


async def emit_account(
    session: AsyncSession, *, account_id: str, event_type: WebhookEventType, data: dict[str, Any]
) -> None:
    """Write an account event (its `data`: the account as the event describes it) and its
    deliveries, in the caller's transaction."""
    endpoints = (
        await session.execute(
            select(WebhookEndpoint.id, WebhookEndpoint.events).where(
                WebhookEndpoint.account_id == account_id, WebhookEndpoint.enabled.is_(True)
            )
        )
    ).all()
    targets = _subscribed(endpoints, event_type)
    if targets:
        await _write(session, account_id, None, event_type, data, targets)


def _subscribed(endpoints: Sequence[Any], event_type: WebhookEventType) -> list[str]:
    return [id_ for id_, events in endpoints if events is None or event_type in events]


async def _write(
    session: AsyncSession,
    account_id: str,
    order_id: str | None,
    event_type: WebhookEventType,
    data: dict[str, Any],
    targets: list[str],
) -> None:
    now = utcnow()
    body = {
        "type": str(event_type),
        "timestamp": now.isoformat().replace("+00:00", "Z"),
        "data": data,
    }
    event_id = new_id("msg")
    connection = await session.connection()
    await connection.execute(
        insert(WebhookEvent).values(
            id=event_id,
            account_id=account_id,
            order_id=order_id,
            type=str(event_type),
            payload=json.dumps(body, separators=(",", ":"), ensure_ascii=False),
            created_at=now,
        )
    )
    await connection.execute(
        insert(WebhookDelivery),
        [
            {
                "id": new_id("whd"),
                "event_id": event_id,
                "endpoint_id": endpoint_id,
                "status": DeliveryStatus.PENDING,
                "attempts": 0,
                "next_attempt_at": now,
                "created_at": now,
                "updated_at": now,
            }
            for endpoint_id in targets
        ],
    )
    ring_after_commit(session)


@dataclass(frozen=True)
class Outcome:
    """What one attempt got: a status code and body, or an error that explains why not."""

    status_code: int | None
    duration_ms: int
    response_body: str | None = None
    error: str | None = None
    retry_after_seconds: float | None = None

    @property
    def succeeded(self) -> bool:
        """2xx and nothing else counts as delivered (redirects are not followed)."""
        return self.status_code is not None and 200 <= self.status_code < 300


@dataclass(frozen=True)
class Claimed:
    """A delivery this dispatcher holds the lease of, with everything needed to send it."""

    delivery_id: str
    lease_token: str
    attempts: int
    event_id: str
    payload: str
    endpoint_id: str
    account_id: str
    url: str
    format: WebhookFormat
    secret: str
    previous_secret: str | None


def _lease_free(now: datetime) -> ColumnElement[bool]:
    """No dispatcher holds the delivery: never leased, or its holder's lease ran out."""
    return or_(WebhookDelivery.lease_expires_at.is_(None), WebhookDelivery.lease_expires_at < now)


async def due(
    session: AsyncSession,
    *,
    now: datetime,
    busy_endpoints: set[str],
    account_load: Mapping[str, int],
    per_account: int,
    limit: int,
) -> list[str]:
    """Up to `limit` due deliveries, the oldest of each endpoint not busy, taken in turns across
    accounts and at most `per_account` in flight per account with `account_load` (a read only)."""
    full = [account for account, load in account_load.items() if load >= per_account]
    ready = [
        WebhookDelivery.status == DeliveryStatus.PENDING,
        WebhookDelivery.next_attempt_at <= now,
        _lease_free(now),
        WebhookEndpoint.enabled.is_(True),
    ]
    if busy_endpoints:
        ready.append(WebhookDelivery.endpoint_id.not_in(sorted(busy_endpoints)))
    if full:
        ready.append(WebhookEndpoint.account_id.not_in(full))
    oldest_first = (WebhookDelivery.next_attempt_at, WebhookDelivery.id)
    ready_rows = (
        select(
            WebhookDelivery.id,
            WebhookDelivery.next_attempt_at,
            WebhookEndpoint.account_id,
            func.row_number()
            .over(partition_by=WebhookDelivery.endpoint_id, order_by=oldest_first)
            .label("in_endpoint"),
        )
        .join(WebhookEndpoint, WebhookEndpoint.id == WebhookDelivery.endpoint_id)
        .where(*ready)
        .subquery()
    )
    heads = (
        select(
            ready_rows.c.id,
            ready_rows.c.account_id,
            ready_rows.c.next_attempt_at,
            func.row_number()
            .over(
                partition_by=ready_rows.c.account_id,
                order_by=(ready_rows.c.next_attempt_at, ready_rows.c.id),
            )
            .label("in_account"),
        )
        .where(ready_rows.c.in_endpoint == 1)
        .subquery()
    )
    # Each account's oldest first, then each account's second...: one account's backlog
    # cannot fill the page while another's delivery waits.
    rows = (
        await session.execute(
            select(heads.c.id, heads.c.account_id)
            .where(heads.c.in_account <= per_account)
            .order_by(heads.c.in_account, heads.c.next_attempt_at, heads.c.id)
            .limit(DUE_SCAN_LIMIT)
        )
    ).all()
    taken: dict[str, int] = {}
    picked: list[str] = []
    for delivery_id, account_id in rows:
        if account_load.get(account_id, 0) + taken.get(account_id, 0) >= per_account:
            continue
        taken[account_id] = taken.get(account_id, 0) + 1
        picked.append(delivery_id)
        if len(picked) >= limit:
            break
    return picked


async def claim(
    session: AsyncSession, *, delivery_ids: list[str], now: datetime, lease_seconds: float
) -> list[Claimed]:
    """Lease these deliveries where no one else did first; what is needed to send each."""
    if not delivery_ids:
        return []
    token = uuid.uuid4().hex
    leased = (
        (
            await session.execute(
                update(WebhookDelivery)
                .where(
                    WebhookDelivery.id.in_(delivery_ids),
                    WebhookDelivery.status == DeliveryStatus.PENDING,
                    _lease_free(now),
                )
                .values(lease_token=token, lease_expires_at=now + timedelta(seconds=lease_seconds))
                .returning(WebhookDelivery.id)
                .execution_options(synchronize_session=False)
            )
        )
        .scalars()
        .all()
    )
    if not leased:
        return []
    rows = await session.execute(
        select(WebhookDelivery, WebhookEvent.payload, WebhookEndpoint)
        .join(WebhookEvent, WebhookEvent.id == WebhookDelivery.event_id)
        .join(WebhookEndpoint, WebhookEndpoint.id == WebhookDelivery.endpoint_id)
        .where(WebhookDelivery.id.in_(leased))
        .order_by(WebhookDelivery.next_attempt_at, WebhookDelivery.id)
    )
    claimed = []
    for delivery, payload, endpoint in rows:
        overlap = endpoint.previous_secret_expires_at is not None and (
            endpoint.previous_secret_expires_at > now
        )
        claimed.append(
            Claimed(
                delivery_id=delivery.id,
                lease_token=token,
                attempts=delivery.attempts,
                event_id=delivery.event_id,
                payload=payload,
                endpoint_id=endpoint.id,
                account_id=endpoint.account_id,
                url=endpoint.url,
                format=endpoint.format,
                secret=endpoint.secret,
                previous_secret=endpoint.previous_secret if overlap else None,
            )
        )
    return claimed


def retry_delay(
    attempts_made: int,
    schedule: Sequence[float],
    *,
    retry_after: float | None = None,
    rng: random.Random | None = None,
) -> float | None:
    """Seconds until the next attempt after `attempts_made` failures; None when none is left.

    `schedule[n]` is the wait before attempt n + 1 (Standard Webhooks: 0, 5 s, 5 min ... 24 h),
    moved by up to 20% either way so that receivers coming back are not hit all at once; a
    receiver's Retry-After is a floor.
    """
    if attempts_made >= len(schedule):
        return None
    delay = schedule[attempts_made] * (1 + (rng or random).uniform(-JITTER, JITTER))
    if retry_after is not None:
        delay = max(delay, min(retry_after, MAX_RETRY_AFTER_SECONDS))
    return delay


async def record_attempt(
    session: AsyncSession,
    *,
    claim: Claimed,
    outcome: Outcome,
    now: datetime,
    schedule: Sequence[float],
    disable_after: timedelta,
) -> str:
    """Store the attempt and move the delivery on; returns the delivery's new status."""
    if await session.get(WebhookDelivery, claim.delivery_id) is None:
        return "deleted"  # its endpoint was deleted while the request was out
    session.add(
        WebhookAttempt(
            id=new_id("wha"),
            delivery_id=claim.delivery_id,
            attempted_at=now,
            status_code=outcome.status_code,
            duration_ms=outcome.duration_ms,
            response_body=outcome.response_body,
            error=outcome.error,
        )
    )
    attempts = claim.attempts + 1
    values: dict[str, object] = {
        "attempts": attempts,
        "last_status_code": outcome.status_code,
        "last_error": outcome.error,
        "lease_token": None,
        "lease_expires_at": None,
        "updated_at": now,
    }
    if outcome.succeeded:
        values |= {"status": DeliveryStatus.SUCCEEDED, "next_attempt_at": None}
        await endpoint_health.note_success(session, endpoint_id=claim.endpoint_id)
    elif outcome.status_code == 410:
        values |= {"status": DeliveryStatus.FAILED, "next_attempt_at": None}
        await endpoint_health.disable_endpoint(
            session,
            endpoint_id=claim.endpoint_id,
            account_id=claim.account_id,
            reason="the receiver answered 410 Gone",
        )
    else:
        delay = retry_delay(attempts, schedule, retry_after=outcome.retry_after_seconds)
        if delay is None:
            values |= {"status": DeliveryStatus.FAILED, "next_attempt_at": None}
        else:
            values["next_attempt_at"] = now + timedelta(seconds=delay)
        await endpoint_health.note_failure(
            session,
            endpoint_id=claim.endpoint_id,
            account_id=claim.account_id,
            now=now,
            disable_after=disable_after,
        )
    await session.execute(
        update(WebhookDelivery)
        .where(
            WebhookDelivery.id == claim.delivery_id,
            WebhookDelivery.lease_token == claim.lease_token,
        )
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return str(values.get("status", DeliveryStatus.PENDING))


async def redeliver(session: AsyncSession, *, delivery_id: str, now: datetime) -> None:
    """Start a delivery's schedule again from an immediate attempt (same webhook-id)."""
    await session.execute(
        update(WebhookDelivery)
        .where(WebhookDelivery.id == delivery_id)
        .values(
            status=DeliveryStatus.PENDING,
            attempts=0,
            next_attempt_at=now,
            updated_at=now,
        )
        .execution_options(synchronize_session=False)
    )
    ring_after_commit(session)


DeliveryRow = tuple[WebhookDelivery, str, list[WebhookAttempt]]


def _deliveries() -> Select[WebhookDelivery, str]:
    return select(WebhookDelivery, WebhookEvent.type).join(
        WebhookEvent, WebhookEvent.id == WebhookDelivery.event_id
    )


async def _with_attempts(
    session: AsyncSession, statement: Select[WebhookDelivery, str]
) -> list[DeliveryRow]:
    rows = (await session.execute(statement)).all()
    ids = [delivery.id for delivery, _ in rows]
    attempts: dict[str, list[WebhookAttempt]] = {i: [] for i in ids}
    if ids:
        found = await session.execute(
            select(WebhookAttempt)
            .where(WebhookAttempt.delivery_id.in_(ids))
            .order_by(WebhookAttempt.id)
        )
        for attempt in found.scalars():
            attempts[attempt.delivery_id].append(attempt)
    return [(delivery, event_type, attempts[delivery.id]) for delivery, event_type in rows]


async def list_deliveries(
    session: AsyncSession, *, endpoint_id: str, cursor: str | None, limit: int
) -> list[DeliveryRow]:
    """An endpoint's deliveries newest first, each with its event type and attempts."""
    statement = _deliveries().where(WebhookDelivery.endpoint_id == endpoint_id)
    if cursor is not None:
        statement = statement.where(WebhookDelivery.id < cursor)
    return await _with_attempts(session, statement.order_by(WebhookDelivery.id.desc()).limit(limit))


async def get_delivery(session: AsyncSession, *, delivery_id: str) -> DeliveryRow | None:
    """One delivery with its event type and attempts."""
    rows = await _with_attempts(session, _deliveries().where(WebhookDelivery.id == delivery_id))
    return rows[0] if rows else None


async def prune(session: AsyncSession, *, older_than: datetime) -> int:
    """Delete events older than `older_than` with nothing left to deliver; returns how many."""
    pending = select(WebhookDelivery.event_id).where(
        WebhookDelivery.status == DeliveryStatus.PENDING
    )
    old = select(WebhookEvent.id).where(
        WebhookEvent.created_at < older_than, WebhookEvent.id.not_in(pending)
    )
    event_ids = list((await session.execute(old)).scalars())
    for start in range(0, len(event_ids), 500):
        batch = event_ids[start : start + 500]
        deliveries = select(WebhookDelivery.id).where(WebhookDelivery.event_id.in_(batch))
        await session.execute(
            delete(WebhookAttempt).where(WebhookAttempt.delivery_id.in_(deliveries))
        )
        await session.execute(delete(WebhookDelivery).where(WebhookDelivery.event_id.in_(batch)))
        await session.execute(delete(WebhookEvent).where(WebhookEvent.id.in_(batch)))
    return len(event_ids)
