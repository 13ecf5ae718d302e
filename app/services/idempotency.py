"""Stripe-style Idempotency-Key handling for POST requests.

The key row is inserted *before* the work runs, in the same transaction, so two requests racing
with one key cannot both do the work: the second insert waits on the unique index (PostgreSQL)
or on the write lock (SQLite) and then finds the first request's stored response to replay.
"""

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.clock import utcnow
from app.core.errors import Conflict, ValidationFailed
from app.storage.models import IdempotencyKey

KEY_LIFETIME = timedelta(hours=24)
MAX_KEY_LENGTH = 255
_IN_PROGRESS = -1


@dataclass(frozen=True)
class StoredResponse:
    """A response as it was (or will be) sent: status, JSON body, and whether it is a replay."""

    status_code: int
    body: Any
    replayed: bool


def request_fingerprint(method: str, path: str, payload: Any) -> str:
    """SHA-256 of the request: the same parameters give the same fingerprint however written."""
    canonical = json.dumps([method, path, payload], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


async def run_once(
    session: AsyncSession,
    *,
    principal: str,
    key: str,
    method: str,
    path: str,
    payload: Any,
    status_code: int,
    action: Callable[[], Awaitable[Any]],
) -> StoredResponse:
    """Run `action` once per (principal, key); a later same request replays its result."""
    if not key or len(key) > MAX_KEY_LENGTH or not key.isprintable():
        raise ValidationFailed(
            f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} printable characters",
            code="invalid_idempotency_key",
        )
    fingerprint = request_fingerprint(method, path, payload)
    await _delete_expired(session, principal=principal, key=key, now=utcnow())
    try:
        async with session.begin_nested():
            session.add(
                IdempotencyKey(
                    principal=principal,
                    key=key,
                    request_method=method,
                    request_path=path,
                    request_hash=fingerprint,
                    response_status=_IN_PROGRESS,
                    response_body=None,
                )
            )
    except IntegrityError:
        return await _replay(session, principal=principal, key=key, fingerprint=fingerprint)
    body = await action()
    await session.execute(
        update(IdempotencyKey)
        .where(IdempotencyKey.principal == principal, IdempotencyKey.key == key)
        .values(response_status=status_code, response_body=body)
        .execution_options(synchronize_session=False)
    )
    return StoredResponse(status_code=status_code, body=body, replayed=False)


async def _replay(
    session: AsyncSession, *, principal: str, key: str, fingerprint: str
) -> StoredResponse:
    stored = (
        await session.execute(
            select(IdempotencyKey)
            .where(IdempotencyKey.principal == principal, IdempotencyKey.key == key)
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()
    if stored is None or stored.response_status == _IN_PROGRESS:
        raise Conflict(
            "a request with this Idempotency-Key is still in progress; retry shortly",
            code="idempotency_key_in_use",
        )
    if stored.request_hash != fingerprint:
        raise ValidationFailed(
            "this Idempotency-Key was used with different parameters; use a new key",
            code="idempotency_key_reused",
        )
    return StoredResponse(
        status_code=stored.response_status, body=stored.response_body, replayed=True
    )


async def _delete_expired(
    session: AsyncSession, *, principal: str, key: str, now: datetime
) -> None:
    await session.execute(
        delete(IdempotencyKey).where(
            IdempotencyKey.principal == principal,
            IdempotencyKey.key == key,
            IdempotencyKey.created_at < now - KEY_LIFETIME,
        )
    )


async def prune_expired(session: AsyncSession, *, now: datetime) -> int:
    """Forget keys older than 24 hours; returns how many."""
    result = await session.execute(
        delete(IdempotencyKey).where(IdempotencyKey.created_at < now - KEY_LIFETIME)
    )
    return int(getattr(result, "rowcount", 0) or 0)
