"""Reading recorded stock history: the intervals and coverage windows of a span, and stock as the
pure estimate and summary take it (`app/stock/stats.py`, `app/stock/summary.py`).

A machine is read by its GPU model, GPUs per node and nodes: a filter on nodes keeps a
cluster's appearances out of what is read for one of its machines, and the reverse."""

from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, and_, exists, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.catalogue import ClusterInterconnect, Interconnect, Provider
from app.core.errors import ValidationFailed
from app.core.market import Fees, Offer, OfferKey
from app.stock.days import day_of, decode, dollars, micros
from app.stock.stats import Stock, spans_of
from app.stock.summary import KeySummary, summarise_key
from app.storage.models import StockCoverage, StockDay, StockInterval


@dataclass(frozen=True)
class HistoryFilter:
    """Which intervals a history page shows, and the span [since, until] they touch."""

    since: datetime
    until: datetime
    gpu_model: str | None = None
    gpu_count: int | None = None
    nodes: int | None = None
    provider: str | None = None
    region: str | None = None


# Read as plain rows, not ORM objects.
_OPEN_INTERVAL_COLUMNS = (
    StockInterval.provider,
    StockInterval.region,
    StockInterval.sku,
    StockInterval.gpu_model,
    StockInterval.gpu_count,
    StockInterval.nodes,
    StockInterval.price_per_hour,
    StockInterval.interconnect,
    StockInterval.cluster_interconnect,
    StockInterval.disk_gb,
    StockInterval.disk_fixed,
    StockInterval.first_seen_at,
    StockInterval.last_seen_at,
)


@dataclass(frozen=True)
class KeyStock:
    """One offer key's stock in a span: per provider price, and when the key was last seen."""

    stock: list[Stock]
    last_seen_at: datetime


@dataclass
class _Pieces:
    offer: Offer  # price left at zero: each price gets its own copy
    last_seen_at: datetime
    packed: list[bytes] = field(default_factory=list)
    open_pieces: list[tuple[float, float, float]] = field(default_factory=list)


def _offer(row: Any) -> Offer:
    return Offer(
        provider=Provider(row.provider),
        region=row.region,
        sku=row.sku,
        gpu_model=row.gpu_model,
        gpu_count=row.gpu_count,
        price_per_hour=Decimal(0),
        interconnect=Interconnect(row.interconnect) if row.interconnect else None,
        disk_gb=row.disk_gb,
        disk_fixed=row.disk_fixed,
        nodes=row.nodes,
        cluster_interconnect=(
            ClusterInterconnect(row.cluster_interconnect) if row.cluster_interconnect else None
        ),
    )


# Rows of `stock_days` fetched at a time when streaming: a few keys' 90 days, about 0.5 MB.
STREAMED_DAYS = 500
_DAY_KEY = (StockDay.provider, StockDay.region, StockDay.sku)
_DAY_MACHINE = (
    StockDay.gpu_model,
    StockDay.gpu_count,
    StockDay.nodes,
    StockDay.interconnect,
    StockDay.cluster_interconnect,
    StockDay.disk_gb,
    StockDay.disk_fixed,
)


async def stock(
    session: AsyncSession,
    *,
    since: datetime,
    until: datetime,
    gpu_model: str | None = None,
    gpu_count: int | None = None,
    nodes: int | None = None,
    providers: Collection[str] | None = None,
) -> dict[OfferKey, KeyStock]:
    """Each offer key's stock on the UTC days [since, until] touches, all at once (see
    `key_by_key`, which gives one key at a time)."""
    found = key_by_key(
        session,
        since=since,
        until=until,
        gpu_model=gpu_model,
        gpu_count=gpu_count,
        nodes=nodes,
        providers=providers,
    )
    return dict(sorted([item async for item in found]))


async def key_by_key(
    session: AsyncSession,
    *,
    since: datetime,
    until: datetime,
    gpu_model: str | None = None,
    gpu_count: int | None = None,
    nodes: int | None = None,
    providers: Collection[str] | None = None,
) -> AsyncIterator[tuple[OfferKey, KeyStock]]:
    """Each offer key's stock on the UTC days [since, until] touches, one key at a time and in no
    set order: its closed intervals from `stock_days` (a row per key and day, whatever the number
    of appearances), streamed so that one key's pieces are held at once, and its open one, to
    its latest sighting. Pieces outside [since, until] may come with it; the arithmetic clips
    them. A filter left None takes any value."""
    where = [StockDay.day >= day_of(since), StockDay.day <= day_of(until)]
    if gpu_model is not None:
        where.append(StockDay.gpu_model == gpu_model)
    if gpu_count is not None:
        where.append(StockDay.gpu_count == gpu_count)
    if nodes is not None:
        where.append(StockDay.nodes == nodes)
    # Open intervals by their partial index alone (one per key at most): a filter on the model
    # could lead the planner to the model's index, through every closed interval.
    open_now = select(*_OPEN_INTERVAL_COLUMNS).where(
        StockInterval.gone_at.is_(None), StockInterval.first_seen_at <= until
    )
    if providers is not None:
        where.append(StockDay.provider.in_(list(providers)))
        open_now = open_now.where(StockInterval.provider.in_(list(providers)))
    # The machine and the latest sighting once per key; the packed pieces, a row per key and
    # day, without a timestamp to convert on each, a key's rows together.
    keys = (
        select(*_DAY_KEY, *_DAY_MACHINE, func.max(StockDay.last_seen_at).label("last_seen_at"))
        .where(*where)
        .group_by(*_DAY_KEY, *_DAY_MACHINE)
    )
    pieces = (
        select(*_DAY_KEY, StockDay.spans)
        .where(*where)
        .order_by(*_DAY_KEY)
        .execution_options(yield_per=STREAMED_DAYS)
    )
    connection = await session.connection()  # plain rows: no ORM result processing needed
    by_key: dict[OfferKey, _Pieces] = {}
    for row in await connection.execute(keys):
        key = OfferKey.of(row)
        entry = by_key.get(key)
        if entry is None or entry.last_seen_at < row.last_seen_at:  # the latest machine wins
            by_key[key] = _Pieces(_offer(row), row.last_seen_at)
    for interval in await connection.execute(open_now):
        if gpu_model not in (None, interval.gpu_model):
            continue
        if gpu_count not in (None, interval.gpu_count):
            continue
        if nodes not in (None, interval.nodes):
            continue
        key = OfferKey.of(interval)
        entry = by_key.setdefault(key, _Pieces(_offer(interval), interval.last_seen_at))
        entry.last_seen_at = max(entry.last_seen_at, interval.last_seen_at)
        start, end = interval.first_seen_at.timestamp(), interval.last_seen_at.timestamp()
        entry.open_pieces.append((start, end, micros(interval.price_per_hour)))
    current: OfferKey | None = None
    # By partitions: an async step per row would cost more than the row.
    async for rows in (await connection.stream(pieces)).partitions():
        for provider, region, sku, packed in rows:
            key = OfferKey(provider, region, sku)
            if key != current and current is not None and current in by_key:
                yield current, _by_price(by_key.pop(current))
            current = key
            # On PostgreSQL each statement sees what was committed when it began: a key whose
            # first day was committed between the two reads is left to the next (not a 500).
            if key in by_key:
                by_key[key].packed.append(packed)
    if current is not None and current in by_key:
        yield current, _by_price(by_key.pop(current))
    for key, entry in by_key.items():  # keys in stock now with no closed interval in the span
        yield key, _by_price(entry)


def _by_price(entry: _Pieces) -> KeyStock:
    pieces = np.concatenate(
        (decode(b"".join(entry.packed)), np.array(entry.open_pieces).reshape(-1, 3))
    )
    order = np.argsort(pieces[:, 2], kind="stable")
    pieces = pieces[order]
    prices, first = np.unique(pieces[:, 2], return_index=True)
    groups = np.split(pieces[:, :2], first[1:])
    return KeyStock(
        stock=[
            Stock(replace(entry.offer, price_per_hour=dollars(price)), spans)
            for price, spans in zip(prices, groups, strict=True)
        ],
        last_seen_at=entry.last_seen_at,
    )


def _touching(since: datetime, until: datetime) -> list[ColumnElement[bool]]:
    """Where clauses: an interval in stock at some moment of [since, until]."""
    return [
        StockInterval.first_seen_at <= until,
        or_(
            StockInterval.gone_at >= since,
            and_(StockInterval.gone_at.is_(None), StockInterval.last_seen_at >= since),
        ),
    ]


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


def span_of(window: StockCoverage) -> tuple[float, float]:
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
    if where.nodes is not None:
        statement = statement.where(StockInterval.nodes == where.nodes)
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
    nodes: int | None = None,
) -> list[KeySummary]:
    """Per provider, region and SKU seen in [since, now]: appearances, time in stock, gaps,
    prices with the current fees, and how long the provider was observed."""
    windows = await coverage(session, since=since, until=now, providers=providers)
    by_provider: dict[str, list[tuple[float, float]]] = {}
    for window in windows:
        by_provider.setdefault(window.provider, []).append(span_of(window))
    # One key's stock at a time: a long window over many keys is never all in memory.
    summaries: list[tuple[OfferKey, KeySummary]] = []
    found = key_by_key(
        session,
        since=since,
        until=now,
        gpu_model=gpu_model,
        gpu_count=gpu_count,
        nodes=nodes,
        providers=providers,
    )
    async for key, key_stock in found:
        summary_of_key = summarise_key(
            key_stock.stock,
            spans_of(by_provider.get(key[0], [])),
            fees=fees,
            since=since,
            now=now,
            last_seen_at=key_stock.last_seen_at,
        )
        if summary_of_key is not None:
            summaries.append((key, summary_of_key))
    return [summary_of_key for _, summary_of_key in sorted(summaries, key=lambda s: s[0])]


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
