"""Stock history rows: batches written by id, takeover, retention, one open interval per key."""

from dataclasses import replace
from decimal import Decimal

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.ids import new_id
from app.services.stock import history as stock_history
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import StockCoverage, StockInterval
from tests.services.stock.history_rows import apply, at, interval, window


async def intervals(engine: AsyncEngine) -> list[StockInterval]:
    async with session_scope(create_sessionmaker(engine)) as session:
        query = select(StockInterval).order_by(StockInterval.first_seen_at, StockInterval.id)
        return list((await session.execute(query)).scalars())


async def windows(engine: AsyncEngine) -> list[StockCoverage]:
    async with session_scope(create_sessionmaker(engine)) as session:
        query = select(StockCoverage).order_by(StockCoverage.started_at, StockCoverage.id)
        return list((await session.execute(query)).scalars())


async def test_an_appearance_opens_an_interval_that_stays_grows_and_closes(
    engine: AsyncEngine,
) -> None:
    row = interval(0, available=2)
    await apply(engine, row)
    (stored,) = await intervals(engine)
    assert (stored.first_seen_at, stored.last_seen_at, stored.gone_at) == (at(0), at(0), None)
    assert stored.price_per_hour == Decimal("2.59")
    assert stored.price_per_hour_with_fees == Decimal("2.8195")
    assert stored.fee_percent == Decimal("5") and not stored.generated

    row.last_seen_at, row.max_available = at(5), 4
    await apply(engine, row)
    row.last_seen_at, row.gone_at = at(9), at(10)
    await apply(engine, row)
    await apply(engine, row)  # a batch written again (its commit's answer was lost) changes nothing
    (stored,) = await intervals(engine)
    assert (stored.last_seen_at, stored.gone_at, stored.max_available) == (at(9), at(10), 4)


async def test_a_price_change_closes_one_interval_and_opens_the_next_in_one_batch(
    engine: AsyncEngine,
) -> None:
    first = interval(0)
    await apply(engine, first)
    first.last_seen_at, first.gone_at = at(3), at(4)
    second = interval(4, price="2.99")
    await apply(engine, second, first)  # the close is written first whatever the order
    old, new = await intervals(engine)
    assert (old.price_per_hour, old.gone_at) == (Decimal("2.59"), at(4))
    assert (new.price_per_hour, new.first_seen_at, new.gone_at) == (Decimal("2.99"), at(4), None)


async def test_a_reappearance_is_a_new_interval(engine: AsyncEngine) -> None:
    first = interval(0)
    first.last_seen_at, first.gone_at = at(1), at(2)
    await apply(engine, first)  # came and went between two batches: one insert, closed
    await apply(engine, interval(30))
    old, new = await intervals(engine)
    assert (old.last_seen_at, old.gone_at) == (at(1), at(2))
    assert (new.first_seen_at, new.gone_at) == (at(30), None)


async def test_one_open_interval_per_offer_key(engine: AsyncEngine) -> None:
    await apply(engine, interval(0))
    with pytest.raises(IntegrityError):
        await apply(engine, interval(1))
    closed = interval(1)
    closed.gone_at = at(2)
    await apply(engine, closed)  # closed ones may be many
    assert len(await intervals(engine)) == 2


async def test_coverage_opens_extends_and_a_period_change_ends_it(engine: AsyncEngine) -> None:
    fast = window(0, period=0.5)
    await apply(engine, fast)
    fast.last_read_at = at(10)
    await apply(engine, fast)
    fast.ended_at = fast.last_read_at
    slow = window(11, period=30)
    await apply(engine, slow, fast)
    first, second = await windows(engine)
    assert (first.period_seconds, first.started_at, first.last_read_at) == (0.5, at(0), at(10))
    assert first.ended_at == at(10)
    assert (second.period_seconds, second.started_at, second.ended_at) == (30, at(11), None)
    with pytest.raises(IntegrityError):
        await apply(engine, window(12, period=30))  # one open window per provider


async def test_a_takeover_closes_what_was_left_at_the_last_writers_last_read(
    engine: AsyncEngine,
) -> None:
    seen = interval(0)
    seen.last_seen_at = at(5)
    reading = window(0)
    reading.last_read_at = at(8)  # read after the interval's last batch
    other = replace(interval(0), provider="hyperstack", id=new_id("stk"))  # never covered
    await apply(engine, seen, reading, other)

    async with session_scope(create_sessionmaker(engine)) as session:
        assert await stock_history.close_abandoned(session) == (2, 1)
    rows = {r.provider: r for r in await intervals(engine)}
    assert (rows["verda"].last_seen_at, rows["verda"].gone_at) == (at(5), at(8))
    assert rows["hyperstack"].gone_at == at(0)
    (closed,) = await windows(engine)
    assert closed.ended_at == at(8)
    async with session_scope(create_sessionmaker(engine)) as session:
        assert await stock_history.close_abandoned(session) == (0, 0)


async def test_prune_keeps_open_rows_and_recent_ones(engine: AsyncEngine) -> None:
    old = interval(0)
    old.gone_at = at(1)
    recent = replace(interval(100), id=new_id("stk"), gone_at=at(101), region="FIN-02")
    still_open = replace(interval(0), id=new_id("stk"), region="FIN-03")
    old_window = window(0)
    old_window.ended_at = at(0)
    open_window = window(0, provider="hyperstack")
    await apply(engine, old, recent, still_open, old_window, open_window)

    async with session_scope(create_sessionmaker(engine)) as session:
        assert await stock_history.prune(session, before=at(50)) == (1, 1)
    assert {r.id for r in await intervals(engine)} == {recent.id, still_open.id}
    assert [w.id for w in await windows(engine)] == [open_window.id]
