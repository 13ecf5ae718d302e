"""Keeping `stock_days` (closed stock by offer key and UTC day) in step with the closed
intervals it is derived from: every interval joins its days in the transaction that closes it,
and leaves them when the history is pruned or generated history is deleted."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Protocol, cast

import numpy as np
from sqlalchemy import Table, bindparam, delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.stock.days import cut, day_of, decode, encode, micros
from app.storage.models import StockDay


class ClosedInterval(Protocol):
    """What of a closed interval its days keep (a stock_intervals row, or one about to be)."""

    provider: str
    region: str
    sku: str
    gpu_model: str
    gpu_count: int
    nodes: int
    interconnect: str | None
    cluster_interconnect: str | None
    disk_gb: int | None
    disk_fixed: bool
    price_per_hour: Decimal
    first_seen_at: datetime
    last_seen_at: datetime
    gone_at: datetime | None


_TABLE = cast(Table, StockDay.__table__)
DayKey = tuple[str, str, str, int]  # provider, region, sku, day


@dataclass
class _Day:
    """One stock_days row being built."""

    machine: dict[str, object]
    last_seen_at: datetime
    pieces: list[tuple[float, float, float]] = field(default_factory=list)


def _days(intervals: Iterable[ClosedInterval]) -> dict[DayKey, _Day]:
    days: dict[DayKey, _Day] = {}
    for interval in intervals:
        if interval.gone_at is None:
            raise ValueError(f"interval of {interval.sku} is still open")
        price = micros(interval.price_per_hour)
        for day, start, end in cut(interval.first_seen_at, interval.gone_at):
            key = (interval.provider, interval.region, interval.sku, day)
            entry = days.get(key)
            if entry is None:
                machine = {
                    "gpu_model": interval.gpu_model,
                    "gpu_count": interval.gpu_count,
                    "nodes": interval.nodes,
                    "interconnect": interval.interconnect,
                    "cluster_interconnect": interval.cluster_interconnect,
                    "disk_gb": interval.disk_gb,
                    "disk_fixed": interval.disk_fixed,
                }
                entry = days[key] = _Day(machine, interval.last_seen_at)
            entry.last_seen_at = max(entry.last_seen_at, interval.last_seen_at)
            entry.pieces.append((start, end, price))
    return days


async def add_closed(
    session: AsyncSession, intervals: Iterable[ClosedInterval], *, generated: bool
) -> int:
    """Add intervals that have just closed (each exactly once) to their days; returns how many
    day rows were written."""
    days = _days(intervals)
    if not days:
        return 0
    existing = await session.execute(
        select(
            StockDay.provider,
            StockDay.region,
            StockDay.sku,
            StockDay.day,
            StockDay.last_seen_at,
            StockDay.spans,
        )
        .where(
            StockDay.generated.is_(generated),
            StockDay.day.in_(sorted({key[3] for key in days})),
            StockDay.provider.in_(sorted({key[0] for key in days})),
        )
        .with_for_update()
    )
    updates = []
    for provider, region, sku, day, last_seen_at, packed in existing:
        entry = days.pop((provider, region, sku, day), None)
        if entry is not None:
            pieces = np.concatenate((decode(packed), np.asarray(entry.pieces).reshape(-1, 3)))
            updates.append(
                {
                    "b_provider": provider,
                    "b_region": region,
                    "b_sku": sku,
                    "b_day": day,
                    "b_last_seen_at": max(last_seen_at, entry.last_seen_at),
                    "b_spans": encode(pieces),
                }
            )
    if updates:
        await session.execute(
            update(_TABLE)
            .where(
                _TABLE.c.provider == bindparam("b_provider"),
                _TABLE.c.region == bindparam("b_region"),
                _TABLE.c.sku == bindparam("b_sku"),
                _TABLE.c.day == bindparam("b_day"),
                _TABLE.c.generated.is_(generated),
            )
            .values(last_seen_at=bindparam("b_last_seen_at"), spans=bindparam("b_spans")),
            updates,
        )
    inserts = [
        {
            "provider": provider,
            "region": region,
            "sku": sku,
            "day": day,
            "generated": generated,
            **entry.machine,
            "last_seen_at": entry.last_seen_at,
            "spans": encode(entry.pieces),
        }
        for (provider, region, sku, day), entry in days.items()
    ]
    for start in range(0, len(inserts), 2_000):
        await session.execute(insert(_TABLE), inserts[start : start + 2_000])
    return len(updates) + len(inserts)


async def prune(session: AsyncSession, *, before: datetime) -> int:
    """Delete the days that end before `before`."""
    result = await session.execute(delete(StockDay).where(StockDay.day < day_of(before)))
    return result.rowcount  # type: ignore[attr-defined,no-any-return]


async def delete_generated(session: AsyncSession) -> int:
    """Delete every generated day (never a recorded one)."""
    result = await session.execute(delete(StockDay).where(StockDay.generated))
    return result.rowcount  # type: ignore[attr-defined,no-any-return]
