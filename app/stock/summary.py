"""What recorded stock history says per offer key (provider, region, SKU): pure (no I/O).

An appearance is a run of one key's intervals joined end to start (a price change is not a new
appearance); its time in stock runs from its first sighting to the read that saw it gone, or to
its last sighting while it is still in stock, counted within the window (one that began before
the window counts from the window's start). Gaps count only when the provider was being read
the whole time between two appearances, since an unobserved gap may hide one. The median price
is weighted by time in stock: half of the time in stock the key was priced at or under it.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from math import ceil

import numpy as np
import numpy.typing as npt

from app.core.market import Fees
from app.stock.stats import Spans, Stock, clip, length, observed_within, union

GAP_TOLERANCE_SECONDS = 1e-3  # float rounding in summed coverage, far below any read period


@dataclass(frozen=True)
class KeySummary:
    """One offer key over the window."""

    provider: str
    region: str
    sku: str
    gpu_model: str
    gpu_count: int  # per node
    nodes: int
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


def nearest_rank(values: npt.NDArray[np.float64], q: float) -> float | None:
    """The q-quantile by nearest rank (an observed value, never an interpolated one)."""
    if not len(values):
        return None
    rank = max(0, ceil(q * len(values)) - 1)
    return float(np.partition(values, rank)[rank])


def weighted_median(prices: Sequence[Decimal], weights: Sequence[float]) -> Decimal:
    """The price at or under which half of the weight lies (an observed price; every price
    weighs the same when no weight is positive)."""
    if sum(weights) <= 0:
        weights = [1.0] * len(prices)
    pairs = sorted(zip(prices, weights, strict=True))
    half, running = sum(weights) / 2, 0.0
    for price, weight in pairs:
        running += weight
        if running >= half:
            return price
    return pairs[-1][0]


def summarise_key(
    stock: Sequence[Stock],
    coverage: Spans,
    *,
    fees: Fees,
    since: datetime,
    now: datetime,
    last_seen_at: datetime,
) -> KeySummary | None:
    """The summary of one key's stock (all of one provider, region and SKU), or None when none
    of it falls in [since, now]."""
    lo, hi = since.timestamp(), now.timestamp()
    every = union(np.concatenate([s.spans for s in stock]))
    runs = every[(every[:, 1] >= lo) & (every[:, 0] <= hi)]
    if not len(runs):
        return None
    observed = clip(union(coverage), lo, hi)
    durations = np.minimum(runs[:, 1], hi) - np.maximum(runs[:, 0], lo)
    gaps = np.column_stack((runs[:-1, 1], runs[1:, 0]))
    gap_lengths = gaps[:, 1] - gaps[:, 0]
    seen_through = observed_within(observed, gaps) >= gap_lengths - GAP_TOLERANCE_SECONDS
    priced = []
    for item in stock:
        starts, ends = np.maximum(item.spans[:, 0], lo), np.minimum(item.spans[:, 1], hi)
        touching = ends >= starts
        if touching.any():
            weight = float(np.sum(ends[touching] - starts[touching]))
            priced.append((fees.apply(item.offer.price_per_hour), weight))
    prices = [price for price, _ in priced]
    first = stock[0].offer
    return KeySummary(
        provider=str(first.provider),
        region=first.region,
        sku=first.sku,
        gpu_model=first.gpu_model,
        gpu_count=first.gpu_count,
        nodes=first.nodes,
        appearances=len(runs),
        hours_in_stock=float(np.sum(durations)) / 3600,
        median_seconds_in_stock=nearest_rank(durations, 0.5),
        p90_seconds_in_stock=nearest_rank(durations, 0.9),
        median_gap_seconds=nearest_rank(gap_lengths[seen_through], 0.5),
        price_min=min(prices),
        price_median=weighted_median(prices, [weight for _, weight in priced]),
        price_max=max(prices),
        last_seen_at=last_seen_at,
        hours_observed=length(observed) / 3600,
    )
