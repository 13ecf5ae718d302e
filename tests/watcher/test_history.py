"""Stock history as the watcher records it: in memory with hand-moved clocks, then end to end
against the simulators with a provider nobody waits for."""

import math
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import ClusterInterconnect, Interconnect
from app.core.market import OrderWants, StockForecast
from app.providers import fake, registry
from app.providers.base import Offer
from app.providers.fake import FakeAdapter
from app.services.stock import estimate as stock_estimate
from app.services.stock import history as stock_history
from app.services.stock import reads as stock_reads
from app.settings import Settings
from app.simulators.control import SimControl
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import StockCoverage, StockDay, StockInterval, StoredForecast
from app.support.schedule import PacedJob, Schedule
from app.watcher.history import WRITE_EVERY_SECONDS
from app.watcher.poller import ProviderPoller
from tests.clock import FakeWallClock
from tests.factories import create_account, waiting_orders
from tests.fixtures.settings import live_settings
from tests.waiting import eventually
from tests.watcher.in_memory import OnFakeAdapter

FEES = {"fee_percent": Decimal("5"), "fee_flat_per_hour": Decimal("0.10")}


class Recorder(OnFakeAdapter):
    """A watcher (not started) on a FakeAdapter, its reads handed over by the test."""

    def __init__(self, engine: AsyncEngine, settings: Settings) -> None:
        self.wall = FakeWallClock()
        super().__init__(engine, settings, FEES, self.wall)
        self.period = self.watcher.periods[self.fake.provider]
        self.start = self.wall()

    async def read(self, *offers: Offer, after: float = 0.0, period: float | None = None) -> None:
        """Let `after` seconds pass, then one successful read showing `offers`."""
        self.clock.advance(after)
        self.wall.advance(after)
        provider = self.fake.provider
        await self.watcher.on_offers(provider, list(offers), self.clock(), period=period)

    async def intervals(self) -> list[StockInterval]:
        await self.watcher.history.flush()
        async with session_scope(create_sessionmaker(self.engine)) as session:
            query = select(StockInterval).order_by(StockInterval.first_seen_at)
            return list((await session.execute(query)).scalars())

    async def windows(self) -> list[StockCoverage]:
        await self.watcher.history.flush()
        async with session_scope(create_sessionmaker(self.engine)) as session:
            query = select(StockCoverage).order_by(StockCoverage.started_at)
            return list((await session.execute(query)).scalars())

    async def forecasts(self) -> list[tuple[str | None, str | None, timedelta]]:
        """Each stored forecast's spans and when it changed, from the first read's time."""
        await self.watcher.history.flush()
        async with session_scope(create_sessionmaker(self.engine)) as session:
            query = select(StoredForecast).order_by(StoredForecast.provider_model)
            rows = (await session.execute(query)).scalars()
            return [(r.within_7_days, r.within_30_days, r.changed_at - self.start) for r in rows]


@pytest.fixture
async def recorder(engine: AsyncEngine, settings: Settings) -> AsyncIterator[Recorder]:
    with registry.offering(fake.SPEC):
        yield Recorder(engine, settings)


async def test_an_offer_that_comes_changes_price_and_goes(recorder: Recorder) -> None:
    offer = recorder.fake.offer(price="20.00", available=1)
    start = recorder.wall()
    await recorder.read(offer)
    (open_,) = await recorder.intervals()
    assert (open_.first_seen_at, open_.last_seen_at, open_.gone_at) == (start, start, None)
    assert open_.price_per_hour_with_fees == Decimal("21.10")
    assert (open_.fee_percent, open_.fee_flat_per_hour) == (Decimal("5"), Decimal("0.10"))

    await recorder.read(offer, after=1)  # unchanged: last_seen_at is not rewritten yet
    assert (await recorder.intervals())[0].last_seen_at == start
    await recorder.read(replace(offer, available=3), after=1)  # more of it: written now
    (grown,) = await recorder.intervals()
    assert (grown.last_seen_at, grown.max_available) == (recorder.wall(), 3)

    await recorder.read(replace(offer, available=2), after=1)
    last_at_old_price = recorder.wall()
    await recorder.read(replace(offer, price_per_hour=Decimal("22.00")), after=1)
    changed_at = recorder.wall()
    await recorder.read(after=1)
    gone_at = recorder.wall()
    await recorder.read(offer, after=1)
    back_at = recorder.wall()

    first, second, third = await recorder.intervals()
    assert (first.last_seen_at, first.gone_at, first.max_available) == (
        last_at_old_price,
        changed_at,
        3,
    )
    assert (second.price_per_hour, second.first_seen_at, second.last_seen_at) == (
        Decimal("22.00"),
        changed_at,
        changed_at,
    )
    assert second.gone_at == gone_at
    assert (third.first_seen_at, third.gone_at) == (back_at, None)
    (window,) = await recorder.windows()
    assert (window.started_at, window.last_read_at, window.ended_at) == (start, back_at, None)
    assert window.period_seconds == recorder.period


async def test_unchanged_reads_are_written_every_few_seconds(recorder: Recorder) -> None:
    offer = recorder.fake.offer()
    await recorder.read(offer)
    await recorder.watcher.history.flush()
    start = recorder.wall()
    for _ in range(math.ceil(WRITE_EVERY_SECONDS / recorder.period) - 1):
        await recorder.read(offer, after=recorder.period)
    assert recorder.wall() - start < timedelta(seconds=WRITE_EVERY_SECONDS)
    ((interval,), (window,)) = (await recorder.intervals(), await recorder.windows())
    assert interval.last_seen_at == window.last_read_at == start  # not rewritten yet
    await recorder.read(offer, after=recorder.period)
    ((interval,), (window,)) = (await recorder.intervals(), await recorder.windows())
    assert interval.last_seen_at == window.last_read_at == recorder.wall()


async def test_failed_reads_are_not_gone_and_a_long_silence_ends_the_coverage(
    recorder: Recorder,
) -> None:
    offer = recorder.fake.offer()
    await recorder.read(offer)
    last_read = recorder.wall()
    recorder.wall.advance(recorder.period * 2)  # reads failing meanwhile: nothing observed
    (still,) = await recorder.intervals()
    assert still.gone_at is None

    recorder.wall.advance(recorder.period * 2 + 1)  # past the gap: not looking any more
    (interval,) = await recorder.intervals()
    (window,) = await recorder.windows()
    assert (interval.last_seen_at, interval.gone_at) == (last_read, last_read)
    assert window.ended_at == last_read

    await recorder.read(offer)  # reading again: a new window, a new interval
    assert [w.ended_at for w in await recorder.windows()] == [last_read, None]
    assert [i.gone_at for i in await recorder.intervals()] == [last_read, None]


async def test_a_change_of_period_ends_one_window_and_starts_another(recorder: Recorder) -> None:
    await recorder.read()
    first_read = recorder.wall()
    await recorder.read(after=0.1, period=30.0)
    slow_read = recorder.wall()
    fast, slow = await recorder.windows()
    assert (fast.period_seconds, fast.ended_at) == (recorder.period, first_read)
    assert (slow.period_seconds, slow.started_at, slow.ended_at) == (30.0, slow_read, None)


NOW = timedelta(0)  # the first read of a test's recorder


def forecast(seven: str | None, thirty: str | None, model: str = "H100-80G-SXM5") -> StockForecast:
    """The fake provider's forecast of its H100 `model` in FAKE-1."""
    provider = fake.SPEC.provider
    return StockForecast(provider, "FAKE-1", model, "H100", Interconnect.SXM, seven, thirty)


async def test_a_forecast_is_written_when_it_changes_and_kept_while_a_read_says_nothing(
    recorder: Recorder,
) -> None:
    pcie, sxm = forecast(None, "5", model="H100-80G-PCIe"), forecast("10+", "25+")
    recorder.fake.forecasts = [pcie, sxm]
    await recorder.read()
    first = [(None, "5", NOW), ("10+", "25+", NOW)]  # by the provider's name: PCIe, SXM5
    assert await recorder.forecasts() == first
    await recorder.read(after=1)  # said again: when it changed stays the first read's
    assert await recorder.forecasts() == first
    recorder.fake.forecasts = None  # a read that did not say (Hyperstack's "Stocks Not Found")
    await recorder.read(after=1)
    assert await recorder.forecasts() == first

    recorder.fake.forecasts = [pcie, replace(sxm, within_7_days="25+")]
    await recorder.read(after=1)
    await recorder.read(after=1)
    assert await recorder.forecasts() == [(None, "5", NOW), ("25+", "25+", timedelta(seconds=3))]
    recorder.fake.forecasts = [pcie]  # SXM5's no longer said: it is gone
    await recorder.read(after=1)
    assert await recorder.forecasts() == [(None, "5", NOW)]


async def test_a_new_lease_holder_reading_the_same_forecast_keeps_when_it_changed(
    recorder: Recorder, engine: AsyncEngine, settings: Settings
) -> None:
    recorder.fake.forecasts = [forecast("10+", "25+")]
    await recorder.read()
    assert await recorder.forecasts() == [("10+", "25+", NOW)]
    successor = Recorder(engine, settings)
    async with session_scope(create_sessionmaker(engine)) as session:
        await stock_history.close_abandoned(session)  # what a new lease holder does first
    successor.wall.set(recorder.wall() + timedelta(seconds=60))
    successor.start = recorder.start
    successor.fake.forecasts = [forecast("10+", "25+")]
    await successor.read()
    assert await successor.forecasts() == [("10+", "25+", NOW)]
    successor.fake.forecasts = [forecast("10+", "100+")]  # the control: a change is written
    await successor.read(after=1)
    assert await successor.forecasts() == [("10+", "100+", timedelta(seconds=61))]


async def test_the_creates_go_out_before_any_history_is_written(
    recorder: Recorder, engine: AsyncEngine
) -> None:
    offer = recorder.fake.offer(price="20.00")
    up_to_fees = replace(offer, price_per_hour=Decimal("21.10"))  # $20 with 5% and $0.10
    await waiting_orders(engine=engine, offer=up_to_fees, credit=100)
    await recorder.watcher.refresh_waiting()
    await recorder.read(offer)
    assert len(recorder.fake.creates) + len(recorder.watcher.deployer.in_flight) >= 1
    async with session_scope(create_sessionmaker(engine)) as session:
        assert (await session.execute(select(StockInterval))).first() is None
    assert len(await recorder.intervals()) == 1


async def test_a_cluster_is_recorded_with_its_nodes_and_counted_only_for_them(
    recorder: Recorder, engine: AsyncEngine
) -> None:
    infiniband = ClusterInterconnect.INFINIBAND
    cluster = recorder.fake.offer(
        gpu_model="B200", nodes=2, price="40.00", cluster_interconnect=infiniband
    )
    single = recorder.fake.offer(gpu_model="B200", price="40.00")  # the same shape per node
    start = recorder.wall()
    await recorder.read(cluster)
    await recorder.read(after=recorder.period)  # gone: closed, and into its day
    await recorder.read(single, after=recorder.period)
    await recorder.read(after=recorder.period)
    rows = {i.sku: (i.nodes, i.cluster_interconnect) for i in await recorder.intervals()}
    assert rows == {cluster.sku: (2, "infiniband"), single.sku: (1, None)}
    async with session_scope(create_sessionmaker(engine)) as session:
        days = (await session.execute(select(StockDay))).scalars()
        assert {d.sku: (d.nodes, d.cluster_interconnect) for d in days} == rows

        async def counted(nodes: int) -> tuple[list[str], int]:
            keys = await stock_reads.summary(
                session, fees=recorder.watcher.fees, since=start, now=recorder.wall(),
                gpu_model="B200", gpu_count=8, providers=None, nodes=nodes,
            )  # fmt: skip
            wants = OrderWants(
                "ord_x", start, frozenset({"fake"}), "B200", 8, Decimal(50), nodes=nodes
            )
            waited = await stock_estimate.expected_wait(
                session, wants=wants, fees=recorder.watcher.fees, window=timedelta(days=1),
                now=recorder.wall(),
            )  # fmt: skip
            return [k.sku for k in keys], waited.main.appearances

        assert await counted(1) == ([single.sku], 1)  # the machine alone, not the cluster
        assert await counted(2) == ([cluster.sku], 1)  # control: the cluster, for two nodes


# End to end: the watcher running against the simulators, history read slowly. Reads more
# than three periods apart close what was open as no longer watched (not gone): on a loaded
# machine a 0.3 s period (a 1 s gap) did that, so the period leaves a 3 s gap.
SLOW = 1.0
HYPER_A100 = ("hyperstack", "n3-A100x1", "CANADA-1")


@pytest.fixture
def settings(database_url: str, sim_url: str, sim: SimControl) -> Settings:
    """Live settings on the simulators, reading providers nobody waits for every SLOW s."""
    return live_settings(database_url, sim_url).model_copy(update={"history_poll_seconds": SLOW})


@pytest.mark.slow  # the watcher on the real clock
async def test_stock_nobody_waits_for_is_recorded_as_it_comes_and_goes(
    sim: SimControl, client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    provider, sku, region = HYPER_A100
    sessionmaker = create_sessionmaker(engine)

    async def rows() -> list[StockInterval]:
        async with session_scope(sessionmaker) as session:
            query = select(StockInterval).where(StockInterval.sku == sku)
            return list((await session.execute(query)).scalars())

    async def opened() -> StockInterval | None:
        found = await rows()
        return found[0] if found and found[0].gone_at is None else None

    async def closed() -> StockInterval | None:
        found = await rows()
        return found[0] if found and found[0].gone_at is not None else None

    await sim.stock(provider, sku, region, 2)
    interval = await eventually(opened, seconds=15)  # a loaded machine's slow reads and batches
    assert (interval.provider, interval.region, interval.max_available) == (provider, region, 2)
    await sim.stock(provider, sku, region, 0)
    interval = await eventually(closed, seconds=15)
    assert interval.gone_at is not None
    assert interval.first_seen_at <= interval.last_seen_at < interval.gone_at

    async def slow_window() -> StockCoverage | None:
        async with session_scope(sessionmaker) as session:
            query = select(StockCoverage).where(
                StockCoverage.provider == provider, StockCoverage.period_seconds == SLOW
            )
            window = (await session.execute(query)).scalars().first()
        return window if window is not None and window.last_read_at > window.started_at else None

    window = await eventually(slow_window, seconds=15)
    assert window.started_at <= interval.first_seen_at

    # What was recorded is what a user reads through the API.
    account = await create_account(client)
    query = {"gpu_model": interval.gpu_model, "provider": provider}
    page = (await client.get("/v1/stock/history", params=query, headers=account.headers)).json()
    shown = [i for i in page["data"] if i["sku"] == sku]
    assert [(i["region"], i["max_available"], i["gone_at"] is not None) for i in shown] == [
        (region, 2, True)
    ]
    assert any(w["provider"] == provider for w in page["coverage"])


@pytest.mark.slow  # the watcher on the real clock
async def test_hyperstacks_forecast_reaches_the_stock_summary_as_it_said_it(
    sim: SimControl, client: httpx.AsyncClient
) -> None:
    account = await create_account(client)
    await sim.forecast(
        "hyperstack", "US-1", "H100-80G-SXM5", planned_7_days="10+", planned_30_days="25+"
    )
    query = {"gpu_model": "H100", "providers": "hyperstack"}

    async def shown() -> list[dict[str, object]] | None:
        summary = await client.get("/v1/stock/summary", params=query, headers=account.headers)
        forecasts: list[dict[str, object]] = summary.json()["forecasts"]
        return forecasts or None

    (forecast,) = await eventually(shown, seconds=15)
    assert (forecast["region"], forecast["provider_model"], forecast["interconnect"]) == (
        "US-1",
        "H100-80G-SXM5",
        "sxm",
    )
    assert (forecast["within_7_days"], forecast["within_30_days"]) == ("10+", "25+")

    await sim.forecast("hyperstack", "US-1", "H100-80G-SXM5")  # no forecast any more

    async def gone() -> bool:
        return await shown() is None

    await eventually(gone, seconds=15)


async def test_a_slow_history_wait_ends_when_an_order_comes_to_want_the_provider() -> None:
    adapter = FakeAdapter()
    reads: list[float] = []
    wanted = False

    async def on_offers(offers: list[Offer], started: float, period: float) -> None:
        reads.append(period)

    async def on_error(error: str) -> None:
        raise AssertionError(error)

    poller = ProviderPoller(
        adapter,
        period=0.01,
        wanted=lambda: wanted,
        on_offers=on_offers,
        on_error=on_error,
        history_period=3600.0,
    )
    schedule = Schedule()
    schedule.start()
    schedule.add("watcher", [PacedJob("read stock", poller.step)])
    try:

        async def read_slowly() -> bool:
            return reads == [3600.0]

        await eventually(read_slowly)
        wanted = True  # an order arrives: no hour-long wait for the next read

        async def read_fast() -> bool:
            return len(reads) >= 3

        await eventually(read_fast)
        assert reads[1:3] == [0.01, 0.01]
    finally:
        await schedule.shutdown()
