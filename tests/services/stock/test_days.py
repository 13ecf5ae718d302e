"""Closed stock by key and day (`stock_days`): kept in step with the intervals it comes from, and
read back as the same stock the intervals describe."""

import random
from dataclasses import replace
from decimal import Decimal

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Interconnect, Provider
from app.core.ids import new_id
from app.core.market import Fees, Offer, OrderWants
from app.services.stock import estimate as stock_estimate
from app.services.stock import history as stock_history
from app.services.stock import reads as stock_reads
from app.services.stock.history import Interval, Window
from app.stock.days import day_of
from app.stock.stats import Stock, estimate, price_curve, spans_of
from app.stock.summary import summarise_key
from app.storage.db import create_sessionmaker, session_scope
from tests.services.stock.history_rows import T0, apply, at, closed, days, interval, window

FEES = Fees(Decimal(5), Decimal("0.10"))


async def test_an_interval_joins_its_day_when_it_closes_and_once(engine: AsyncEngine) -> None:
    row = interval(0)
    await apply(engine, row)
    assert await days(engine) == {}  # open: read from stock_intervals until it closes
    row.last_seen_at, row.gone_at = at(9), at(10)
    await apply(engine, row)
    await apply(engine, row)  # a batch written again after an unclear commit
    today = day_of(T0)
    assert await days(engine) == {("FIN-01", today): [(0, 10, Decimal("2.59"))]}
    # The same key closing again, at another price, joins the same day.
    await apply(engine, closed(20, 30, price="2.99"))
    assert await days(engine) == {
        ("FIN-01", today): [(0, 10, Decimal("2.59")), (20, 30, Decimal("2.99"))]
    }


async def test_an_interval_over_midnight_is_cut_there_and_read_back_whole(
    engine: AsyncEngine,
) -> None:
    # T0 is noon: in stock from 22:00 to 02:00 the next day.
    await apply(engine, closed(10 * 3600, 14 * 3600))
    today = day_of(T0)
    assert await days(engine) == {
        ("FIN-01", today): [(36_000, 43_200, Decimal("2.59"))],
        ("FIN-01", today + 1): [(43_200, 50_400, Decimal("2.59"))],
    }
    async with session_scope(create_sessionmaker(engine)) as session:
        (summary,) = await stock_reads.summary(
            session, fees=FEES, since=T0, now=at(86_400), gpu_model="H100", gpu_count=1,
            providers=None,
        )  # fmt: skip
    assert summary.appearances == 1 and summary.median_seconds_in_stock == 4 * 3600


async def test_a_takeover_puts_what_it_closes_in_its_days(engine: AsyncEngine) -> None:
    left_open = interval(0)
    left_open.last_seen_at = at(5)
    reading = window(0)
    reading.last_read_at = at(8)
    await apply(engine, left_open, reading)
    async with session_scope(create_sessionmaker(engine)) as session:
        await stock_history.close_abandoned(session)
    assert await days(engine) == {("FIN-01", day_of(T0)): [(0, 8, Decimal("2.59"))]}


async def test_prune_drops_the_days_that_end_before_the_cutoff(engine: AsyncEngine) -> None:
    await apply(engine, closed(0, 10), closed(86_400, 86_410, region="FIN-02"))
    today = day_of(T0)
    async with session_scope(create_sessionmaker(engine)) as session:
        await stock_history.prune(session, before=at(6 * 3600))  # today, 18:00
    assert set(await days(engine)) == {("FIN-01", today), ("FIN-02", today + 1)}
    async with session_scope(create_sessionmaker(engine)) as session:
        await stock_history.prune(session, before=at(86_400 - 3600))  # tomorrow, 11:00
    assert set(await days(engine)) == {("FIN-02", today + 1)}


async def test_generated_days_go_with_generated_history(engine: AsyncEngine) -> None:
    await apply(engine, closed(0, 10))
    made = replace(closed(20, 30), id=new_id("stk"), region="FIN-02")
    made_window = Window(new_id("cov"), "verda", 1.0, at(0), at(40), at(40))
    async with session_scope(create_sessionmaker(engine)) as session:
        await stock_history.insert_generated(session, [made], [made_window])
    assert set(await days(engine)) == {("FIN-01", day_of(T0)), ("FIN-02", day_of(T0))}
    async with session_scope(create_sessionmaker(engine)) as session:
        await stock_history.delete_generated(session)
    assert set(await days(engine)) == {("FIN-01", day_of(T0))}


def history(seed: int) -> list[Interval]:
    """Three days of closed intervals at two regions, with price changes, some over midnight."""
    rng = random.Random(seed)
    rows = []
    for region in ("FIN-01", "FIN-02"):
        moment = rng.uniform(0, 3600)
        while moment < 3 * 86_400:
            length = rng.choice((rng.uniform(30, 3600), rng.uniform(3600, 30 * 3600)))
            price = rng.choice(("2.59", "2.79", "3.10"))
            rows.append(closed(moment, moment + length, price=price, region=region))
            if rng.random() < 0.3:  # a price change: the next interval starts as this one ends
                moment += length
            else:
                moment += length + rng.uniform(60, 6 * 3600)
    return rows


@pytest.mark.parametrize("seed", range(4))
async def test_days_give_the_answers_the_intervals_give(engine: AsyncEngine, seed: int) -> None:
    rows = history(seed)
    for start in range(0, len(rows), 7):  # batches, as the recorder writes them
        await apply(engine, *rows[start : start + 7])
    reading = window(0)
    reading.last_read_at = reading.ended_at = at(3 * 86_400)
    await apply(engine, reading)
    since, now = at(5 * 3600), at(2.5 * 86_400)  # inside: the window cuts some appearances
    coverage = spans_of([(T0.timestamp(), at(3 * 86_400).timestamp())])

    async with session_scope(create_sessionmaker(engine)) as session:
        from_days = await stock_reads.summary(
            session, fees=FEES, since=since, now=now, gpu_model="H100", gpu_count=1,
            providers=None,
        )  # fmt: skip
        wants = OrderWants(
            id="ord_x", created_at=T0, providers=frozenset({"verda"}), gpu_model="H100",
            gpu_count=1, max_price_per_hour=Decimal("2.90"),
        )  # fmt: skip
        waited = await stock_estimate.expected_wait(
            session, wants=wants, fees=FEES, window=now - since, now=now
        )
    direct = []
    for region in ("FIN-01", "FIN-02"):
        stock = [direct_stock(r) for r in rows if r.region == region]
        last_seen = max(r.last_seen_at for r in rows if r.region == region)
        direct.append(
            summarise_key(stock, coverage, fees=FEES, since=since, now=now, last_seen_at=last_seen)
        )
    assert from_days == direct
    every = [direct_stock(r) for r in rows]
    expected = estimate(wants, every, coverage, fees=FEES, since=since, now=now)
    assert expected.appearances > 0 and expected.wait is not None
    assert waited.main == expected
    curve = price_curve(wants, every, coverage, fees=FEES, since=since, now=now)
    assert list(waited.curve) == curve


def direct_stock(row: Interval) -> Stock:
    """An interval as its own stock, straight from the row: no days in between."""
    assert row.gone_at is not None and row.interconnect is not None
    offer = Offer(
        provider=Provider(row.provider), region=row.region, sku=row.sku, gpu_model=row.gpu_model,
        gpu_count=row.gpu_count, price_per_hour=row.price_per_hour,
        interconnect=Interconnect(row.interconnect), disk_gb=row.disk_gb,
        disk_fixed=row.disk_fixed,
    )  # fmt: skip
    return Stock(offer, spans_of([(row.first_seen_at.timestamp(), row.gone_at.timestamp())]))
