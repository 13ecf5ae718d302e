"""What recorded stock history says per offer key (provider, region, SKU): pure (no I/O).

An appearance is a run of one key's intervals joined end to start (a price change is not a new
appearance); its time in stock runs from its first sighting to the read that saw it gone, or to
its last sighting while it is still in stock. Gaps count only when the provider was being read
the whole time between two appearances, since an unobserved gap may hide one.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from itertools import pairwise
from math import ceil
from typing import TypeVar

from app.market import Fees
from app.stock_stats import Seen, Span, clip, intersect_length, union

Q = TypeVar("Q", float, Decimal)


@dataclass(frozen=True)
class KeySummary:
    """One offer key over the window."""

    provider: str
    region: str
    sku: str
    gpu_model: str
    gpu_count: int
    appearances: int
    hours_in_stock: float  # within the window
    median_seconds_in_stock: float | None
    p90_seconds_in_stock: float | None
    median_gap_seconds: float | None  # between appearances, fully observed gaps only
    price_min: Decimal  # per hour, with the current fees
    price_median: Decimal
    price_max: Decimal
    last_seen_at: datetime
    hours_observed: float  # the provider's coverage within the window


def nearest_rank(values: Sequence[Q], q: float) -> Q | None:
    """The q-quantile by nearest rank (an observed value, never an interpolated one)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, ceil(q * len(ordered)) - 1)]


def summarise_key(
    seen: Sequence[Seen],
    coverage: Sequence[Span],
    *,
    fees: Fees,
    since: datetime,
    now: datetime,
    last_seen_at: datetime,
) -> KeySummary:
    """The summary of one key's intervals (all of one provider, region and SKU; at least one)."""
    lo, hi = since.timestamp(), now.timestamp()
    runs = union((s.start.timestamp(), s.end.timestamp()) for s in seen)
    observed = clip(union(coverage), lo, hi)
    durations = [end - start for start, end in runs]
    gaps = [
        (a[1], b[0])
        for a, b in pairwise(runs)
        if intersect_length([(a[1], b[0])], observed) >= b[0] - a[1]
    ]
    prices = [fees.apply(s.offer.price_per_hour) for s in seen]
    first = seen[0].offer
    return KeySummary(
        provider=str(first.provider),
        region=first.region,
        sku=first.sku,
        gpu_model=first.gpu_model,
        gpu_count=first.gpu_count,
        appearances=len(runs),
        hours_in_stock=sum(e - s for s, e in clip(runs, lo, hi)) / 3600,
        median_seconds_in_stock=nearest_rank(durations, 0.5),
        p90_seconds_in_stock=nearest_rank(durations, 0.9),
        median_gap_seconds=nearest_rank([b - a for a, b in gaps], 0.5),
        price_min=min(prices),
        price_median=nearest_rank(prices, 0.5) or min(prices),
        price_max=max(prices),
        last_seen_at=last_seen_at,
        hours_observed=sum(e - s for s, e in observed) / 3600,
    )
