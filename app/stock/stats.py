"""The expected wait for an order, from recorded stock history: pure (no I/O, no session).

Observed time is the union of the coverage windows (when the providers were being read),
clipped to the window. Moments are sampled on a regular grid over it; at each moment the wait
is zero if a matching offer is in stock, else the time to the next matching appearance when the
whole stretch up to it was observed, else it is censored at the end of that observed stretch
(we only know it is at least that long). Median and p90 come from the Kaplan-Meier estimate of
the wait's survival, so a censored wait never counts as a short one. Matching is the watcher's
own (`market.matches`) with the current fees, decided once per offer and price: a 90-day window
holds tens of thousands of spans, which are handled as arrays.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from app.core.market import Fees, Offer, OrderWants, fits, matches
from app.core.money import format_usd

MIN_OBSERVED = timedelta(hours=1)  # less than this in the window: no estimate
CURVE_LEVELS = 3  # observed prices shown on each side of the order's max

Spans = npt.NDArray[np.float64]  # shape (n, 2): [start, end) in seconds since the epoch


def spans_of(pairs: Iterable[tuple[float, float]]) -> Spans:
    """An (n, 2) array of [start, end) pairs."""
    return np.asarray(list(pairs), dtype=np.float64).reshape(-1, 2)


@dataclass(frozen=True)
class Stock:
    """When one offer was in stock at one provider price (an offer key whose price changed has
    one per price): closed intervals end when a read saw them gone, open ones at their latest
    sighting."""

    offer: Offer
    spans: Spans


@dataclass(frozen=True)
class Wait:
    """Median and p90 of the wait; a quantile never reached is given as "more than" instead."""

    median_seconds: float | None
    median_more_than_seconds: float | None
    p90_seconds: float | None
    p90_more_than_seconds: float | None


@dataclass(frozen=True)
class Estimate:
    """The expected wait at one max price, or why there is none (`missing`)."""

    max_price_per_hour: Decimal
    observed_seconds: float
    appearances: int  # runs of matching stock of one offer key that reach into observed time
    in_stock_fraction: float | None  # of observed time, with matching stock
    wait: Wait | None  # None when `missing`
    missing: str | None = None

    @property
    def sufficient(self) -> bool:
        """Whether there is enough data for a wait."""
        return self.missing is None


class Samples(NamedTuple):
    """Waits at the grid's moments: how long, and whether the end was seen (False: censored,
    the wait is at least that long)."""

    seconds: npt.NDArray[np.float64]
    seen: npt.NDArray[np.bool_]


def union(spans: Spans) -> Spans:
    """Disjoint, sorted spans covering the same time; touching spans join. An empty span (one
    read saw it) stays unless another covers it."""
    spans = spans[spans[:, 1] >= spans[:, 0]]
    if not len(spans):
        return spans
    spans = spans[np.argsort(spans[:, 0], kind="stable")]
    reach = np.maximum.accumulate(spans[:, 1])
    first = np.flatnonzero(np.concatenate(([True], spans[1:, 0] > reach[:-1])))
    return np.column_stack((spans[first, 0], np.maximum.reduceat(spans[:, 1], first)))


def clip(spans: Spans, lo: float, hi: float) -> Spans:
    """The spans cut to [lo, hi), empty ones dropped."""
    cut = np.column_stack((np.maximum(spans[:, 0], lo), np.minimum(spans[:, 1], hi)))
    return cut[cut[:, 1] > cut[:, 0]]


def length(spans: Spans) -> float:
    """The total length of spans that do not overlap."""
    return float(np.sum(spans[:, 1] - spans[:, 0]))


def observed_before(observed: Spans, moments: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """For each moment, how much of `observed` (disjoint, sorted) lies before it."""
    lengths = observed[:, 1] - observed[:, 0]
    ends = np.cumsum(lengths)
    if not len(observed):
        return np.zeros(np.shape(moments))
    return np.interp(moments, observed.ravel(), np.column_stack((ends - lengths, ends)).ravel())


def observed_within(observed: Spans, spans: Spans) -> npt.NDArray[np.float64]:
    """For each span, how much of it lies in `observed` (disjoint, sorted)."""
    return observed_before(observed, spans[:, 1]) - observed_before(observed, spans[:, 0])


MAX_GRID_POINTS = 2_000  # each wait is exact; more moments only sharpen the quantiles a little


def grid_step(observed_seconds: float) -> float:
    """Sampling step: 60 s, finer for short observation (1000 points at least, 1 s at the
    finest), coarser for long (`MAX_GRID_POINTS` at most: 5 min over 7 days, 65 min over 90;
    the estimate is computed up to seven times a request, once per price level)."""
    return min(max(observed_seconds / MAX_GRID_POINTS, 60.0), max(observed_seconds / 1000, 1.0))


def waits(observed: Spans, stock: Spans, step: float) -> Samples:
    """The wait at each grid moment of `observed`; both disjoint and sorted."""
    counts = np.maximum(1, ((observed[:, 1] - observed[:, 0]) // step).astype(np.int64))
    stretch = np.repeat(np.arange(len(observed)), counts)
    offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    moments = observed[stretch, 0] + offsets * step
    stretch_end = observed[stretch, 1]
    starts = np.append(stock[:, 0], np.inf)
    ends = np.append(stock[:, 1], -np.inf)
    last = np.searchsorted(starts, moments, side="right") - 1  # the latest start at or before
    in_stock = (last >= 0) & (ends[last] > moments)
    following = starts[last + 1]
    seen = in_stock | (following < stretch_end)
    until = np.where(in_stock, moments, np.where(seen, following, stretch_end))
    return Samples(until - moments, seen)


def kaplan_meier_quantile(samples: Samples, q: float) -> tuple[float, bool]:
    """The q-quantile of the wait from right-censored samples: (time, True) when the survival
    curve falls to 1 - q, else (the longest follow-up, False): "more than that"."""
    if not len(samples.seconds):
        return 0.0, False
    times, index = np.unique(samples.seconds, return_inverse=True)
    events = np.bincount(index, weights=samples.seen.astype(np.float64), minlength=len(times))
    leaving = np.bincount(index, minlength=len(times))
    at_risk = len(samples.seconds) - (np.cumsum(leaving) - leaving)
    survival = np.cumprod(1 - events / at_risk)
    reached = np.flatnonzero((events > 0) & (survival <= 1 - q + 1e-12))
    if len(reached):
        return float(times[reached[0]]), True
    return float(times[-1]), False


def wait_of(samples: Samples) -> Wait:
    """Median and p90 of the wait, each either a time or a "more than"."""
    median, median_seen = kaplan_meier_quantile(samples, 0.5)
    p90, p90_seen = kaplan_meier_quantile(samples, 0.9)
    return Wait(
        median_seconds=median if median_seen else None,
        median_more_than_seconds=None if median_seen else median,
        p90_seconds=p90 if p90_seen else None,
        p90_more_than_seconds=None if p90_seen else p90,
    )


def runs(stock: Iterable[Stock]) -> Spans:
    """Appearances: the spans of each offer key joined where one ends as the next begins (a
    price change is not a new appearance), all keys together, sorted by start."""
    by_key: dict[tuple[str, str, str], list[Spans]] = {}
    for item in stock:
        by_key.setdefault(item.offer.key, []).append(item.spans)
    joined = [union(np.concatenate(parts)) for parts in by_key.values()]
    if not joined:
        return np.empty((0, 2))
    every = np.concatenate(joined)
    return every[np.argsort(every[:, 0], kind="stable")]


def describe_duration(seconds: float) -> str:
    """A duration for a sentence: `12 minutes`, `3.5 hours`, `7 days`."""
    if seconds < 3600:
        return f"{round(seconds / 60)} minutes"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} hours".replace(".0 ", " ")
    return f"{seconds / 86400:.1f} days".replace(".0 ", " ")


def estimate(
    wants: OrderWants,
    stock: Sequence[Stock],
    coverage: Spans,
    *,
    fees: Fees,
    since: datetime,
    now: datetime,
    step: float | None = None,
    also: Sequence[OrderWants] = (),
) -> Estimate:
    """The expected wait of `wants` over [since, now], from the recorded stock and the coverage
    of the order's providers; with `also` (an order's other alternatives), the wait for the
    first stock any of them matches."""
    lo, hi = since.timestamp(), now.timestamp()
    observed = clip(union(coverage), lo, hi)
    observed_seconds = length(observed)
    window = describe_duration(hi - lo)
    every = (wants, *also)
    matching = [
        s
        for s in stock
        if any(matches(w, s.offer, fees.apply(s.offer.price_per_hour)) for w in every)
    ]
    appearances = runs(matching)
    appearances = appearances[observed_within(observed, appearances) > 0]
    in_stock = union(appearances)
    price = wants.max_price_per_hour
    base = Estimate(price, observed_seconds, len(appearances), None, None)
    if observed_seconds < MIN_OBSERVED.total_seconds():
        missing = f"observed only {describe_duration(observed_seconds)} of the last {window}"
        return replace(base, missing=missing)
    fraction = float(np.sum(observed_within(observed, in_stock))) / observed_seconds
    if not len(appearances):
        missing = (
            f"no appearance at or under {format_usd(price)} in "
            f"{describe_duration(observed_seconds)} of observation over the last {window}"
        )
        return replace(base, in_stock_fraction=0.0, missing=missing)
    samples = waits(observed, in_stock, step or grid_step(observed_seconds))
    return replace(base, in_stock_fraction=fraction, wait=wait_of(samples))


def curve_prices(wants: OrderWants, stock: Iterable[Stock], fees: Fees) -> list[Decimal]:
    """The price levels of the curve: the distinct observed prices with (current) fees of
    offers that fit the order, the `CURVE_LEVELS` nearest below its max and above it. Between
    two observed prices the answer cannot change, so these are the levels that matter."""
    prices = {fees.apply(s.offer.price_per_hour) for s in stock if fits(wants, s.offer)}
    below = sorted(p for p in prices if p < wants.max_price_per_hour)[-CURVE_LEVELS:]
    above = sorted(p for p in prices if p > wants.max_price_per_hour)[:CURVE_LEVELS]
    return below + above


def price_curve(
    wants: OrderWants,
    stock: Sequence[Stock],
    coverage: Spans,
    *,
    fees: Fees,
    since: datetime,
    now: datetime,
    step: float | None = None,
) -> list[Estimate]:
    """The same estimate at the curve's price levels, cheapest first."""
    return [
        estimate(
            replace(wants, max_price_per_hour=price),
            stock,
            coverage,
            fees=fees,
            since=since,
            now=now,
            step=step,
        )
        for price in curve_prices(wants, stock, fees)
    ]
