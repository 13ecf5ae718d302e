"""How many orders one account may place in an hour: what it can make the service store."""

import math
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import TooManyPlacements
from app.storage.models import Order

WINDOW = timedelta(hours=1)


async def check(session: AsyncSession, *, account_id: str, per_hour: int, now: datetime) -> None:
    """Refuse a placement when the account placed `per_hour` orders in the hour before `now`
    (cancelled ones too), saying when the oldest of them leaves the hour.

    Read in the placing transaction, after the account's row is locked (`placing`): two
    placements at once, on any replicas, cannot both see room for one more.
    """
    oldest_counted = await session.scalar(
        select(Order.created_at)
        .where(Order.account_id == account_id, Order.created_at > now - WINDOW)
        .order_by(Order.created_at.desc())
        .offset(per_hour - 1)
        .limit(1)
    )
    if oldest_counted is None:
        return
    wait = max(1, math.ceil((oldest_counted + WINDOW - now).total_seconds()))
    raise TooManyPlacements(
        f"this account placed {per_hour} orders in the last hour, the most it may; "
        f"retry in {wait} s",
        details={"max_placements_per_hour": per_hour},
        retry_after=wait,
    )
