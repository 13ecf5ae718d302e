"""Stock history: an interval per appearance of an offer at one price, and coverage windows of
when each provider was being read. Written by the lease holder's watcher only.

The watcher keeps the open rows in memory and hands over, batched, each row as it should now
be stored (`apply`); rows are addressed by id, so a batch written again after an unclear
failure writes the same rows again instead of adding twins.
"""

from dataclasses import asdict, dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.services.stock import days as stock_days
from app.storage.models import StockCoverage, StockInterval


@dataclass
class Interval:
    """One stock_intervals row as it should be stored."""

    id: str
    provider: str
    region: str
    sku: str
    gpu_model: str
    gpu_count: int
    interconnect: str | None
    disk_gb: int | None
    disk_fixed: bool
    price_per_hour: Decimal
    fee_percent: Decimal
    fee_flat_per_hour: Decimal
    price_per_hour_with_fees: Decimal
    first_seen_at: datetime
    last_seen_at: datetime
    gone_at: datetime | None = None
    max_available: int | None = None
    nodes: int = 1  # machines in the offer: `gpu_count` is per node, the price for all
    cluster_interconnect: str | None = None


@dataclass
class Window:
    """One stock_coverage row as it should be stored."""

    id: str
    provider: str
    period_seconds: float
    started_at: datetime
    last_read_at: datetime
    ended_at: datetime | None = None


@dataclass
class Changes:
    """Rows new or changed since the last batch."""

    intervals: list[Interval] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.intervals or self.windows)


async def apply(session: AsyncSession, changes: Changes) -> None:
    """Store a batch: update the rows that exist (closes first), then insert the rest."""
    if changes.windows:
        windows = [asdict(w) for w in changes.windows]
        await _upsert(session, _table(StockCoverage), windows, ("last_read_at", "ended_at"))
    if changes.intervals:
        ids = [i.id for i in changes.intervals]
        closed_before = set(
            (
                await session.execute(
                    select(StockInterval.id).where(
                        StockInterval.id.in_(ids), StockInterval.gone_at.is_not(None)
                    )
                )
            ).scalars()
        )
        intervals = [asdict(i) for i in changes.intervals]
        changing = ("last_seen_at", "gone_at", "max_available")
        await _upsert(session, _table(StockInterval), intervals, changing)
        # A batch written again after an unclear failure finds its closes already made: each
        # interval joins its days once.
        closing = [i for i in changes.intervals if i.gone_at and i.id not in closed_before]
        await stock_days.add_closed(session, closing, generated=False)


def _table(model: type[StockInterval] | type[StockCoverage]) -> Table:
    return cast(Table, model.__table__)


async def _upsert(
    session: AsyncSession, table: Table, rows: list[dict[str, Any]], changing: tuple[str, ...]
) -> None:
    ids = [row["id"] for row in rows]
    existing = set((await session.execute(select(table.c.id).where(table.c.id.in_(ids)))).scalars())
    # Updates go first: a price change's next interval may open on the same key in this batch,
    # and the partial unique index allows one open interval per key.
    updates = [
        {"b_id": row["id"], **{f"b_{name}": row[name] for name in changing}}
        for row in rows
        if row["id"] in existing
    ]
    if updates:
        statement = (
            update(table)
            .where(table.c.id == bindparam("b_id"))
            .values({name: bindparam(f"b_{name}") for name in changing})
        )
        await session.execute(statement, updates)
    inserts = [{**row, "generated": False} for row in rows if row["id"] not in existing]
    if inserts:
        await session.execute(insert(table), inserts)


async def close_abandoned(session: AsyncSession) -> tuple[int, int]:
    """A new writer starts: close what the last one left open, at that writer's last read.

    Coverage windows end at their last read; an interval is gone at the later of its own last
    sighting and its provider's last recorded read. Returns (intervals, windows) closed.
    """
    windows = (
        (await session.execute(select(StockCoverage).where(StockCoverage.ended_at.is_(None))))
        .scalars()
        .all()
    )
    for window in windows:
        window.ended_at = window.last_read_at
    last_reads = await session.execute(
        select(StockCoverage.provider, func.max(StockCoverage.last_read_at)).group_by(
            StockCoverage.provider
        )
    )
    last_read: dict[str, datetime] = dict(last_reads.all())
    intervals = (
        (await session.execute(select(StockInterval).where(StockInterval.gone_at.is_(None))))
        .scalars()
        .all()
    )
    for interval in intervals:
        provider_read = last_read.get(interval.provider)
        interval.gone_at = (
            interval.last_seen_at
            if provider_read is None
            else max(interval.last_seen_at, provider_read)
        )
    await session.flush()
    await stock_days.add_closed(session, intervals, generated=False)
    return len(intervals), len(windows)


async def prune(session: AsyncSession, *, before: datetime) -> tuple[int, int]:
    """Delete closed intervals and windows last seen/read before `before`; never open ones."""
    intervals = await session.execute(
        delete(StockInterval).where(
            StockInterval.gone_at.is_not(None), StockInterval.last_seen_at < before
        )
    )
    windows = await session.execute(
        delete(StockCoverage).where(
            StockCoverage.ended_at.is_not(None), StockCoverage.last_read_at < before
        )
    )
    await stock_days.prune(session, before=before)
    return intervals.rowcount, windows.rowcount  # type: ignore[attr-defined]


# Generated history (`autoprovision demo-history`): made-up rows for demo mode, marked
# `generated` so that the API and the page can say so, and never mixed up with recorded ones.
GENERATED_CHUNK = 5_000  # rows per INSERT statement


async def insert_generated(
    session: AsyncSession, intervals: list[Interval], windows: list[Window]
) -> None:
    """Insert closed generated rows in chunks, each marked `generated`."""
    for table, rows in (
        (_table(StockCoverage), [asdict(w) for w in windows]),
        (_table(StockInterval), [asdict(i) for i in intervals]),
    ):
        for start in range(0, len(rows), GENERATED_CHUNK):
            chunk = [{**row, "generated": True} for row in rows[start : start + GENERATED_CHUNK]]
            await session.execute(insert(table), chunk)
    await stock_days.add_closed(session, intervals, generated=True)


async def delete_generated(session: AsyncSession) -> tuple[int, int]:
    """Delete every generated interval and coverage window (never a recorded one)."""
    intervals = await session.execute(delete(StockInterval).where(StockInterval.generated))
    windows = await session.execute(delete(StockCoverage).where(StockCoverage.generated))
    await stock_days.delete_generated(session)
    return intervals.rowcount, windows.rowcount  # type: ignore[attr-defined]


async def count_generated(session: AsyncSession) -> tuple[int, int]:
    """How many generated (intervals, coverage windows) are stored."""
    intervals = await session.scalar(
        select(func.count()).select_from(StockInterval).where(StockInterval.generated)
    )
    windows = await session.scalar(
        select(func.count()).select_from(StockCoverage).where(StockCoverage.generated)
    )
    return intervals or 0, windows or 0


async def first_recorded_read(session: AsyncSession) -> datetime | None:
    """When the recorded (not generated) history begins: its earliest coverage window."""
    return await session.scalar(
        select(func.min(StockCoverage.started_at)).where(StockCoverage.generated.is_(False))
    )
