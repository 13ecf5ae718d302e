"""The expected wait for an order, from recorded stock history: pure (no I/O, no session).

Observed time is the union of the coverage windows (when the providers were being read),
clipped to the window. Moments are sampled on a regular grid over it; at each moment the wait
is zero if a matching offer is in stock, else the time to the next matching appearance when the
whole stretch up to it was observed, else it is censored at the end of that observed stretch
(we only know it is at least that long). Median and p90 come from the Kaplan-Meier estimate of
the wait's survival, so a censored wait never counts as a short one. Matching is the watcher's
own (`market.matches`) with the current fees.
"""

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal

from app.market import Fees, Offer, OrderWants, fits, matches
from app.money import format_usd

MIN_OBSERVED = timedelta(hours=1)  # less than this in the window: no estimate
CURVE_LEVELS = 3  # observed prices shown on each side of the order's max


@dataclass(frozen=True)
class Seen:
    """One recorded appearance of an offer at one provider price, in stock from `start` to
    `end` (gone_at when closed, last_seen_at while open)."""

    offer: Offer
    start: datetime
    end: datetime


Span = tuple[float, float]  # [start, end) in seconds since the epoch


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


def union(spans: Iterable[Span]) -> list[Span]:
    """Disjoint, sorted spans covering the same time; touching spans join."""
    merged: list[Span] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def clip(spans: Iterable[Span], lo: float, hi: float) -> list[Span]:
    """The spans cut to [lo, hi), empty ones dropped."""
    return [(max(s, lo), min(e, hi)) for s, e in spans if min(e, hi) > max(s, lo)]


def intersect_length(a: Sequence[Span], b: Sequence[Span]) -> float:
    """The length of time in both of two disjoint sorted span lists."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


MAX_GRID_POINTS = 2_000  # each wait is exact; more moments only sharpen the quantiles a little


def grid_step(observed_seconds: float) -> float:
    """Sampling step: 60 s, finer for short observation (1000 points at least, 1 s at the
    finest), coarser for long (`MAX_GRID_POINTS` at most: 5 min over 7 days, 65 min over 90;
    the estimate is computed up to seven times a request, once per price level)."""
    return min(max(observed_seconds / MAX_GRID_POINTS, 60.0), max(observed_seconds / 1000, 1.0))


def waits(observed: Sequence[Span], stock: Sequence[Span], step: float) -> list[tuple[float, bool]]:
    """(wait, seen-to-end) at each grid moment of `observed`; False: censored at the end of the
    observed stretch. Both lists disjoint and sorted."""
    starts = [s for s, _ in stock]
    samples: list[tuple[float, bool]] = []
    for lo, hi in observed:
        count = max(1, int((hi - lo) // step))
        for k in range(count):
            t = lo + k * step
            i = bisect_right(starts, t) - 1
            if i >= 0 and stock[i][1] > t:
                samples.append((0.0, True))
            elif i + 1 < len(starts) and starts[i + 1] < hi:
                samples.append((starts[i + 1] - t, True))
            else:
                samples.append((hi - t, False))
    return samples


def kaplan_meier_quantile(samples: Iterable[tuple[float, bool]], q: float) -> tuple[float, bool]:
    """The q-quantile of the wait from right-censored samples: (time, True) when the survival
    curve falls to 1 - q, else (the longest follow-up, False): "more than that"."""
    events: Counter[float] = Counter()
    censored: Counter[float] = Counter()
    for duration, seen in samples:
        (events if seen else censored)[duration] += 1
    at_risk = sum(events.values()) + sum(censored.values())
    survival = 1.0
    for time in sorted(set(events) | set(censored)):
        if events[time]:
            survival *= 1 - events[time] / at_risk
            if survival <= 1 - q + 1e-12:
                return time, True
        at_risk -= events[time] + censored[time]
    longest = max([*events, *censored], default=0.0)
    return float(longest), False


def wait_of(samples: Sequence[tuple[float, bool]]) -> Wait:
    """Median and p90 of the wait, each either a time or a "more than"."""
    median, median_seen = kaplan_meier_quantile(samples, 0.5)
    p90, p90_seen = kaplan_meier_quantile(samples, 0.9)
    return Wait(
        median_seconds=median if median_seen else None,
        median_more_than_seconds=None if median_seen else median,
        p90_seconds=p90 if p90_seen else None,
        p90_more_than_seconds=None if p90_seen else p90,
    )


def _epoch(moment: datetime) -> float:
    return moment.timestamp()


def _runs(seen: Iterable[Seen]) -> list[Span]:
    """Appearances: spans of one offer key, joined where one interval ends as the next begins
    (a price change is not a new appearance)."""
    by_key: dict[tuple[str, str, str], list[Span]] = {}
    for item in seen:
        by_key.setdefault(item.offer.key, []).append((_epoch(item.start), _epoch(item.end)))
    runs: list[Span] = []
    for spans in by_key.values():
        runs.extend(union(spans))
    return sorted(runs)


def describe_duration(seconds: float) -> str:
    """A duration for a sentence: `12 minutes`, `3.5 hours`, `7 days`."""
    if seconds < 3600:
        return f"{round(seconds / 60)} minutes"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} hours".replace(".0 ", " ")
    return f"{seconds / 86400:.1f} days".replace(".0 ", " ")


def estimate(
    wants: OrderWants,
    seen: Sequence[Seen],
    coverage: Sequence[Span],
    *,
    fees: Fees,
    since: datetime,
    now: datetime,
    step: float | None = None,
) -> Estimate:
    """The expected wait of `wants` over [since, now], from the recorded appearances and the
    coverage of the order's providers."""
    lo, hi = _epoch(since), _epoch(now)
    observed = clip(union(coverage), lo, hi)
    observed_seconds = sum(e - s for s, e in observed)
    window = describe_duration(hi - lo)
    matching = [s for s in seen if matches(wants, s.offer, fees.apply(s.offer.price_per_hour))]
    runs = [r for r in _runs(matching) if intersect_length([r], observed) > 0]
    stock = union(runs)
    price = wants.max_price_per_hour
    base = Estimate(price, observed_seconds, len(runs), None, None)
    if observed_seconds < MIN_OBSERVED.total_seconds():
        missing = f"observed only {describe_duration(observed_seconds)} of the last {window}"
        return replace(base, missing=missing)
    fraction = intersect_length(observed, stock) / observed_seconds
    if not runs:
        missing = (
            f"no appearance at or under {format_usd(price)} in "
            f"{describe_duration(observed_seconds)} of observation over the last {window}"
        )
        return replace(base, in_stock_fraction=0.0, missing=missing)
    samples = waits(observed, stock, step or grid_step(observed_seconds))
    return replace(base, in_stock_fraction=fraction, wait=wait_of(samples))


def curve_prices(wants: OrderWants, seen: Iterable[Seen], fees: Fees) -> list[Decimal]:
    """The price levels of the curve: the distinct observed prices with (current) fees of
    offers that fit the order, the `CURVE_LEVELS` nearest below its max and above it. Between
    two observed prices the answer cannot change, so these are the levels that matter."""
    prices = {fees.apply(s.offer.price_per_hour) for s in seen if fits(wants, s.offer)}
    below = sorted(p for p in prices if p < wants.max_price_per_hour)[-CURVE_LEVELS:]
    above = sorted(p for p in prices if p > wants.max_price_per_hour)[:CURVE_LEVELS]
    return below + above


def price_curve(
    wants: OrderWants,
    seen: Sequence[Seen],
    coverage: Sequence[Span],
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
            seen,
            coverage,
            fees=fees,
            since=since,
            now=now,
            step=step,
        )
        for price in curve_prices(wants, seen, fees)
    ]
