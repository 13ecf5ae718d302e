"""Stock history rows (intervals and read windows) at seconds after T0, written as the recorder
writes them, for the tests of the history and of its days."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.ids import new_id
from app.services.stock import history as stock_history
from app.services.stock.history import Changes, Interval, Window
from app.stock.days import decode, dollars
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import StockDay

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
KEY = ("verda", "FIN-01", "1H100.80S.30V")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def interval(seen: float, price: str = "2.59", available: int | None = 2) -> Interval:
    provider, region, sku = KEY
    return Interval(
        id=new_id("stk"),
        provider=provider,
        region=region,
        sku=sku,
        gpu_model="H100",
        gpu_count=1,
        interconnect="pcie",
        disk_gb=100,
        disk_fixed=False,
        price_per_hour=Decimal(price),
        fee_percent=Decimal("5"),
        fee_flat_per_hour=Decimal("0.10"),
        price_per_hour_with_fees=Decimal(price) * Decimal("1.05") + Decimal("0.10"),
        first_seen_at=at(seen),
        last_seen_at=at(seen),
        max_available=available,
    )


def window(read: float, period: float = 1.0, provider: str = "verda") -> Window:
    return Window(new_id("cov"), provider, period, at(read), at(read))


async def apply(engine: AsyncEngine, *rows: Interval | Window) -> None:
    changes = Changes(
        intervals=[replace(r) for r in rows if isinstance(r, Interval)],
        windows=[replace(r) for r in rows if isinstance(r, Window)],
    )
    async with session_scope(create_sessionmaker(engine)) as session:
        await stock_history.apply(session, changes)


async def days(engine: AsyncEngine) -> dict[tuple[str, int], list[tuple[float, float, Decimal]]]:
    """(region, day) -> the pieces kept for it, as (start, end) seconds after T0 and price."""
    async with session_scope(create_sessionmaker(engine)) as session:
        rows = (await session.execute(select(StockDay))).scalars().all()
    base = T0.timestamp()
    return {
        (row.region, row.day): sorted(
            (start - base, end - base, dollars(price)) for start, end, price in decode(row.spans)
        )
        for row in rows
    }


def closed(seen: float, gone: float, price: str = "2.59", region: str = "FIN-01") -> Interval:
    """An interval of KEY's SKU at `region`, in stock from `seen` to `gone` seconds after T0."""
    row = replace(interval(seen, price), region=region, gone_at=at(gone))
    row.last_seen_at = at(gone - 1)
    return row
