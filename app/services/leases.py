"""Named leases: at most one holder at a time, taken over once the holder stops renewing.

Taking and renewing are one compare-and-set UPDATE (free, expired, or already ours), so two
processes racing for a lease cannot both win, on SQLite or PostgreSQL. Expiry uses the
processes' clocks (the `now` each caller passes): keep them in sync (NTP) to well under the
lease's time to live.
"""

from datetime import datetime, timedelta

from sqlalchemy import or_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.storage.models import Lease


async def acquire(
    session: AsyncSession,
    *,
    name: str,
    holder: str,
    ttl: float,
    now: datetime,
    force: bool = False,
) -> bool:
    """Take or renew the lease for `ttl` seconds from `now`; False while someone else holds it
    (until `now` reaches its expiry).

    `force` takes it whoever holds it: only for a process that knows it is the only one
    (SQLite, where a file lock already keeps every other process out).
    """
    expires_at = now + timedelta(seconds=ttl)
    statement = update(Lease).where(Lease.name == name)
    if not force:
        statement = statement.where(or_(Lease.holder == holder, Lease.expires_at <= now))
    renewed = (
        await session.execute(
            statement.values(holder=holder, expires_at=expires_at)
            .returning(Lease.name)
            .execution_options(synchronize_session=False)
        )
    ).first()
    if renewed is not None:
        return True
    if await session.get(Lease, name) is not None:
        return False
    try:
        async with session.begin_nested():
            session.add(Lease(name=name, holder=holder, expires_at=expires_at))
    except IntegrityError:
        return False  # someone created it first
    return True


async def release(session: AsyncSession, *, name: str, holder: str, now: datetime) -> None:
    """Give the lease up at once (on a clean shutdown), if we hold it: it expires at `now`."""
    await session.execute(
        update(Lease)
        .where(Lease.name == name, Lease.holder == holder)
        .values(expires_at=now)
        .execution_options(synchronize_session=False)
    )
