"""Reading recorded stock history: the intervals and coverage windows of a span, and rows as the
pure estimate and summary take them (`app/stock_stats.py`, `app/stock_summary.py`)."""

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Protocol, cast

from sqlalchemy import ColumnElement, and_, exists, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.catalogue import Interconnect, Provider
from app.errors import ValidationFailed
from app.market import Fees, Offer
from app.models import StockCoverage, StockInterval
from app.stock_stats import Seen, Span
from app.stock_summary import KeySummary, summarise_key


@dataclass(frozen=True)
class HistoryFilter:
    """Which intervals a history page shows, and the span [since, until] they touch."""

    since: datetime
    until: datetime
    gpu_model: str | None = None
    gpu_count: int | None = None
    provider: str | None = None
    region: str | None = None


class IntervalRow(Protocol):
    """The columns of an interval the estimate and the summary read."""

    provider: str
    region: str
    sku: str
    gpu_model: str
    gpu_count: int
    price_per_hour: Decimal
    interconnect: str | None
    disk_gb: int | None
    disk_fixed: bool
    max_available: int | None
    first_seen_at: datetime
    last_seen_at: datetime
    gone_at: datetime | None


# Read as plain rows, not ORM objects: a 90-day window of one GPU model is tens of thousands of
# intervals, and building an ORM object for each took most of the request.
_INTERVAL_COLUMNS = (
    StockInterval.provider,
    StockInterval.region,
    StockInterval.sku,
    StockInterval.gpu_model,
    StockInterval.gpu_count,
    StockInterval.price_per_hour,
    StockInterval.interconnect,
    StockInterval.disk_gb,
    StockInterval.disk_fixed,
    StockInterval.max_available,
    StockInterval.first_seen_at,
    StockInterval.last_seen_at,
    StockInterval.gone_at,
)


def seen_of(row: IntervalRow) -> Seen:
    """An interval as the pure estimate sees it: an offer, in stock from first sighting to the
    read that saw it gone (or to the last sighting while still in stock)."""
    offer = Offer(
        provider=Provider(row.provider),
        region=row.region,
        sku=row.sku,
        gpu_model=row.gpu_model,
        gpu_count=row.gpu_count,
        price_per_hour=row.price_per_hour,
        interconnect=Interconnect(row.interconnect) if row.interconnect else None,
        disk_gb=row.disk_gb,
        disk_fixed=row.disk_fixed,
        available=row.max_available,
    )
    return Seen(offer, row.first_seen_at, row.gone_at or row.last_seen_at)


def _touching(since: datetime, until: datetime) -> list[ColumnElement[bool]]:
    """Where clauses: an interval in stock at some moment of [since, until]."""
    return [
        StockInterval.first_seen_at <= until,
        or_(
            StockInterval.gone_at >= since,
            and_(StockInterval.gone_at.is_(None), StockInterval.last_seen_at >= since),
        ),
    ]


async def intervals(
    session: AsyncSession,
    *,
    since: datetime,
    until: datetime,
    gpu_model: str | None = None,
    gpu_count: int | None = None,
    providers: Collection[str] | None = None,
) -> Sequence[IntervalRow]:
    """Every interval in stock at some moment of [since, until], oldest first."""
    statement = select(*_INTERVAL_COLUMNS).where(*_touching(since, until))
    if gpu_model is not None:
        statement = statement.where(StockInterval.gpu_model == gpu_model)
    if gpu_count is not None:
        statement = statement.where(StockInterval.gpu_count == gpu_count)
    if providers is not None:
        statement = statement.where(StockInterval.provider.in_(list(providers)))
    statement = statement.order_by(StockInterval.first_seen_at, StockInterval.id)
    return cast(Sequence[IntervalRow], (await session.execute(statement)).all())


async def coverage(
    session: AsyncSession,
    *,
    since: datetime,
    until: datetime,
    providers: Collection[str] | None = None,
) -> list[StockCoverage]:
    """The coverage windows that overlap [since, until], oldest first."""
    statement = select(StockCoverage).where(
        StockCoverage.started_at <= until,
        or_(
            StockCoverage.ended_at >= since,
            and_(StockCoverage.ended_at.is_(None), StockCoverage.last_read_at >= since),
        ),
    )
    if providers is not None:
        statement = statement.where(StockCoverage.provider.in_(list(providers)))
    statement = statement.order_by(StockCoverage.started_at, StockCoverage.id)
    return list((await session.execute(statement)).scalars())


def span_of(window: StockCoverage) -> Span:
    """A coverage window as epoch seconds: to its end, or to its latest read while open."""
    end = window.ended_at or window.last_read_at
    return (window.started_at.timestamp(), end.timestamp())


async def history_page(
    session: AsyncSession, *, where: HistoryFilter, cursor: str | None, limit: int
) -> list[StockInterval]:
    """Intervals newest first (by first sighting), after `cursor` (an interval id)."""
    statement = select(StockInterval).where(*_touching(where.since, where.until))
    if where.gpu_model is not None:
        statement = statement.where(StockInterval.gpu_model == where.gpu_model)
    if where.gpu_count is not None:
        statement = statement.where(StockInterval.gpu_count == where.gpu_count)
    if where.provider is not None:
        statement = statement.where(StockInterval.provider == where.provider)
    if where.region is not None:
        statement = statement.where(StockInterval.region == where.region)
    if cursor is not None:
        after = await session.get(StockInterval, cursor)
        if after is None:
            message = "not a cursor of this list (the interval may have been forgotten)"
            raise ValidationFailed(
                f"cursor: {message}", details=[{"field": "cursor", "message": message}]
            )
        statement = statement.where(
            or_(
                StockInterval.first_seen_at < after.first_seen_at,
                and_(
                    StockInterval.first_seen_at == after.first_seen_at,
                    StockInterval.id < after.id,
                ),
            )
        )
    statement = statement.order_by(
        StockInterval.first_seen_at.desc(), StockInterval.id.desc()
    ).limit(limit)
    return list((await session.execute(statement)).scalars())


async def summary(
    session: AsyncSession,
    *,
    fees: Fees,
    since: datetime,
    now: datetime,
    gpu_model: str | None,
    gpu_count: int | None,
    providers: Collection[str] | None,
) -> list[KeySummary]:
    """Per provider, region and SKU seen in [since, now]: appearances, time in stock, gaps,
    prices with the current fees, and how long the provider was observed."""
    rows = await intervals(
        session,
        since=since,
        until=now,
        gpu_model=gpu_model,
        gpu_count=gpu_count,
        providers=providers,
    )
    windows = await coverage(session, since=since, until=now, providers=providers)
    by_provider: dict[str, list[Span]] = {}
    for window in windows:
        by_provider.setdefault(window.provider, []).append(span_of(window))
    by_key: dict[tuple[str, str, str], list[IntervalRow]] = {}
    for row in rows:
        by_key.setdefault((row.provider, row.region, row.sku), []).append(row)
    return [
        summarise_key(
            [seen_of(r) for r in key_rows],
            by_provider.get(key[0], []),
            fees=fees,
            since=since,
            now=now,
            last_seen_at=max(r.last_seen_at for r in key_rows),
        )
        for key, key_rows in sorted(by_key.items())
    ]


async def includes_generated(
    session: AsyncSession,
    *,
    since: datetime,
    until: datetime,
    providers: Collection[str] | None = None,
) -> bool:
    """Whether generated (demo-history) rows are in stock or covering some moment of
    [since, until]: then what is shown of it is partly made up."""
    generated_coverage = select(StockCoverage.id).where(
        StockCoverage.generated,
        StockCoverage.started_at <= until,
        or_(StockCoverage.ended_at >= since, StockCoverage.ended_at.is_(None)),
    )
    if providers is not None:
        generated_coverage = generated_coverage.where(StockCoverage.provider.in_(list(providers)))
    return bool(await session.scalar(select(exists(generated_coverage))))
