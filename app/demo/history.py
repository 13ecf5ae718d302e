"""Made-up stock history for demo mode (`autoprovision demo-history`): a few appearances an hour
of every machine the simulators sell, over the last N days, so the Stock page, the summary and
the expected wait have something to show at once. Every row is marked `generated`.

Appearances follow a Poisson process per offer key (a rate drawn per key), lasting minutes to
an hour or two (log-normal); one in seven is at a price a little off the list price. Each
provider's coverage spans the whole time but for a gap or two of not looking, and no interval
reaches into a gap (a recorder that is not reading sees nothing). Generated history ends where
recorded history begins, so the two never overlap.
"""

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.clock import utcnow
from app.core.ids import new_id
from app.core.market import Fees
from app.providers.registry import simulated_specs
from app.services.stock import history as stock_history
from app.services.stock.history import Interval, Window
from app.simulators.registry import new_simulator
from app.storage.db import session_scope

APPEARANCES_PER_HOUR = (1.0, 3.0)  # each key's rate is drawn from this range
MEDIAN_MINUTES_IN_STOCK = 8.0
SHORTEST_SECONDS, LONGEST_SECONDS = 30.0, 3 * 3600.0
OFF_PRICE_SHARE = 1 / 7
OFF_PRICE_FACTORS = (Decimal("0.90"), Decimal("0.95"), Decimal("1.05"), Decimal("1.10"))
_CENT = Decimal("0.01")


@dataclass(frozen=True)
class Machine:
    """One offer key a simulator sells, as the watcher would record it."""

    provider: str
    region: str
    sku: str
    gpu_model: str
    gpu_count: int
    price_per_hour: Decimal
    interconnect: str | None
    disk_gb: int | None


@dataclass(frozen=True)
class Generated:
    """What was made: the rows and the span they cover."""

    intervals: list[Interval]
    windows: list[Window]
    since: datetime
    until: datetime


class AlreadyGenerated(RuntimeError):
    """Generated history is stored already (and `replace` was not asked for)."""


def simulated_catalogue() -> list[Machine]:
    """Every offer key of every simulated provider's catalogue, in the registry's order."""
    machines = []
    for spec in simulated_specs():
        assert spec.simulator is not None
        simulator = new_simulator(spec.name).state.simulator
        for entry in simulator.catalog.values():
            machines.append(
                Machine(
                    provider=spec.name,
                    region=entry.region,
                    sku=entry.sku,
                    gpu_model=entry.gpu_model,
                    gpu_count=entry.gpu_count,
                    price_per_hour=entry.price_per_hour,
                    interconnect=entry.interconnect,
                    disk_gb=entry.disk_gb,
                )
            )
    return machines


def _gaps(rng: random.Random, lo: float, hi: float) -> list[tuple[float, float]]:
    """A gap or two of not looking (15 to 90 minutes) in spans of a day or more."""
    days = (hi - lo) / 86400
    count = 0 if days < 1 else 1 if days < 7 else 2
    gaps = []
    for _ in range(count):
        length = rng.uniform(15, 90) * 60
        start = rng.uniform(lo + 3600, hi - 3600 - length)
        gaps.append((start, start + length))
    return sorted(gaps)


def _covered(
    lo: float, hi: float, gaps: Sequence[tuple[float, float]]
) -> list[tuple[float, float]]:
    spans, start = [], lo
    for gap_start, gap_end in gaps:
        if gap_start > start:
            spans.append((start, gap_start))
        start = max(start, gap_end)
    if hi > start:
        spans.append((start, hi))
    return spans


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def generate(
    machines: Sequence[Machine],
    *,
    since: datetime,
    until: datetime,
    fees: Fees,
    periods: Mapping[str, float],
    seed: int | None = None,
    appearances_per_hour: tuple[float, float] = APPEARANCES_PER_HOUR,
) -> Generated:
    """Intervals and coverage windows for `machines` over [since, until] (all closed)."""
    rng = random.Random(seed)
    lo, hi = since.timestamp(), until.timestamp()
    windows: list[Window] = []
    covered: dict[str, list[tuple[float, float]]] = {}
    for provider in dict.fromkeys(m.provider for m in machines):
        covered[provider] = _covered(lo, hi, _gaps(rng, lo, hi))
        for start, end in covered[provider]:
            windows.append(
                Window(
                    id=new_id("cov"),
                    provider=provider,
                    period_seconds=periods.get(provider, 1.0),
                    started_at=_at(start),
                    last_read_at=_at(end),
                    ended_at=_at(end),
                )
            )
    intervals: list[Interval] = []
    mu = math.log(MEDIAN_MINUTES_IN_STOCK * 60)
    for machine in machines:
        rate = rng.uniform(*appearances_per_hour) / 3600
        period = periods.get(machine.provider, 1.0)
        spans = covered[machine.provider]
        t = lo
        while True:
            t += rng.expovariate(rate)
            length = min(max(rng.lognormvariate(mu, 1.0), SHORTEST_SECONDS), LONGEST_SECONDS)
            start, end = t, min(t + length, hi)
            t += length
            if start >= hi:
                break
            if not any(s <= start and end <= e for s, e in spans):
                continue  # not being read then: not seen
            price = machine.price_per_hour
            if rng.random() < OFF_PRICE_SHARE:
                price = (price * rng.choice(OFF_PRICE_FACTORS)).quantize(_CENT)
            intervals.append(
                Interval(
                    id=new_id("stk"),
                    provider=machine.provider,
                    region=machine.region,
                    sku=machine.sku,
                    gpu_model=machine.gpu_model,
                    gpu_count=machine.gpu_count,
                    interconnect=machine.interconnect,
                    disk_gb=machine.disk_gb,
                    disk_fixed=False,
                    price_per_hour=price,
                    fee_percent=fees.percent,
                    fee_flat_per_hour=fees.flat_per_hour,
                    price_per_hour_with_fees=fees.apply(price),
                    first_seen_at=_at(start),
                    last_seen_at=_at(max(start, end - period)),
                    gone_at=_at(end),
                    max_available=rng.choice((1, 1, 1, 2, 4)),
                )
            )
    return Generated(intervals, windows, since, until)


async def write_demo_history(
    sessionmaker: async_sessionmaker[AsyncSession],
    *,
    days: float,
    fees: Fees,
    periods: Mapping[str, float],
    seed: int | None = None,
    replace: bool = False,
    machines: Sequence[Machine] | None = None,
    now: datetime | None = None,
) -> tuple[Generated, tuple[int, int]]:
    """Generate `days` of history ending where recorded history begins (or now) and store it
    in one transaction. Returns what was made and the (intervals, windows) deleted first."""
    async with session_scope(sessionmaker) as session:
        stored = await stock_history.count_generated(session)
        if any(stored) and not replace:
            raise AlreadyGenerated(
                f"{stored[0]} generated intervals and {stored[1]} coverage windows are stored "
                "already; pass --replace to delete them first"
            )
        deleted = await stock_history.delete_generated(session) if replace else (0, 0)
        recorded = await stock_history.first_recorded_read(session)
        until = min(now or utcnow(), recorded) if recorded else (now or utcnow())
        made = generate(
            machines if machines is not None else simulated_catalogue(),
            since=until - timedelta(days=days),
            until=until,
            fees=fees,
            periods=periods,
            seed=seed,
        )
        await stock_history.insert_generated(session, made.intervals, made.windows)
    return made, deleted
