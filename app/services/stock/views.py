"""How the service shows stock history, its summary and the expected wait (API responses)."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.services.views import MoneyOut, OrderOut
from app.stock.stats import Estimate
from app.stock.summary import KeySummary


class WaitOut(BaseModel):
    """The expected wait at one max price; `status` "insufficient_data" says in `missing` what
    is lacking, and a quantile the data never reached is `*_more_than_seconds` instead."""

    max_price_per_hour: MoneyOut
    status: Literal["ok", "insufficient_data"]
    missing: str | None
    observed_hours: float
    appearances: int
    in_stock_fraction: float | None
    median_seconds: int | None
    median_more_than_seconds: int | None
    p90_seconds: int | None
    p90_more_than_seconds: int | None

    @classmethod
    def present(cls, estimate: Estimate) -> "WaitOut":
        """An estimate, in whole seconds."""
        wait = estimate.wait

        def whole(value: float | None) -> int | None:
            return None if value is None else round(value)

        fraction = estimate.in_stock_fraction
        return cls(
            max_price_per_hour=estimate.max_price_per_hour,
            status="ok" if estimate.sufficient else "insufficient_data",
            missing=estimate.missing,
            observed_hours=round(estimate.observed_seconds / 3600, 2),
            appearances=estimate.appearances,
            in_stock_fraction=None if fraction is None else round(fraction, 4),
            median_seconds=whole(wait.median_seconds) if wait else None,
            median_more_than_seconds=whole(wait.median_more_than_seconds) if wait else None,
            p90_seconds=whole(wait.p90_seconds) if wait else None,
            p90_more_than_seconds=whole(wait.p90_more_than_seconds) if wait else None,
        )


class EstimateOut(WaitOut):
    """The expected wait over a window at the order's max, and at observed prices around it."""

    nodes: int  # the machines wanted together: only offers of that many nodes count
    window: str
    since: datetime
    until: datetime
    price_curve: list[WaitOut]
    includes_generated: bool = False  # made-up demo history (`autoprovision demo-history`)


class StockIntervalOut(BaseModel):
    """One appearance of an offer at one price (`gone_at` null while in stock)."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    provider: str
    region: str
    sku: str
    gpu_model: str
    gpu_count: int  # per node
    nodes: int  # machines in the offer (1: a single machine)
    interconnect: str | None
    cluster_interconnect: str | None  # between its nodes; null for a single machine
    disk_gb: int | None
    disk_fixed: bool
    price_per_hour: MoneyOut  # all its nodes
    fee_percent: MoneyOut  # the fees in force when it was seen
    fee_flat_per_hour: MoneyOut
    price_per_hour_with_fees: MoneyOut
    first_seen_at: datetime
    last_seen_at: datetime
    gone_at: datetime | None
    max_available: int | None
    generated: bool


class CoverageOut(BaseModel):
    """A span during which a provider's stock was read (`ended_at` null while reading)."""

    model_config = ConfigDict(from_attributes=True)

    provider: str
    period_seconds: float
    started_at: datetime
    last_read_at: datetime
    ended_at: datetime | None
    generated: bool


class HistoryOut(BaseModel):
    """A page of intervals, newest first, and the coverage windows of the same span."""

    nodes: int  # the intervals shown are of offers of this many nodes
    data: list[StockIntervalOut]
    next_cursor: str | None
    since: datetime
    until: datetime
    coverage: list[CoverageOut]


class KeySummaryOut(BaseModel):
    """One provider, region and SKU over the window (prices with the current fees)."""

    model_config = ConfigDict(from_attributes=True)

    provider: str
    region: str
    sku: str
    gpu_model: str
    gpu_count: int  # per node
    nodes: int
    appearances: int
    hours_in_stock: float
    median_seconds_in_stock: float | None
    p90_seconds_in_stock: float | None
    median_gap_seconds: float | None
    price_min: MoneyOut
    price_median: MoneyOut
    price_max: MoneyOut
    last_seen_at: datetime
    hours_observed: float

    @classmethod
    def present(cls, summary: KeySummary) -> "KeySummaryOut":
        """A key's summary, hours to two decimals."""
        out = cls.model_validate(summary)
        out.hours_in_stock = round(out.hours_in_stock, 2)
        out.hours_observed = round(out.hours_observed, 2)
        return out


class ForecastOut(BaseModel):
    """What a provider says it plans to have of one of its GPU models in one region, as its
    last read said it: the provider's word, not ours, and no promise. Hyperstack's counts GPUs
    in its own buckets ("0".."9", "10+", "25+", "100+", "200+"), kept as it wrote them."""

    model_config = ConfigDict(from_attributes=True)

    provider: str
    region: str
    provider_model: str = Field(description="The provider's own name for the GPU.")
    gpu_model: str
    interconnect: str | None
    within_7_days: str | None = Field(
        description="What it says it plans within 7 days, in its words; null: nothing said."
    )
    within_30_days: str | None = Field(
        description="What it says it plans within 30 days, in its words; null: nothing said."
    )
    changed_at: datetime = Field(description="The first read that said it as it is now.")


class SummaryOut(BaseModel):
    """Per provider, region and SKU, what the window's history says; and, per provider and
    region, what the provider says is to come."""

    nodes: int  # the keys shown are offers of this many nodes
    window: str
    since: datetime
    until: datetime
    data: list[KeySummaryOut]
    includes_generated: bool = False  # made-up demo history (`autoprovision demo-history`)
    forecasts: list[ForecastOut] = Field(
        default_factory=list,
        description=(
            "The providers' own forecasts of the GPU model asked for (any count or nodes), as "
            "last read, whatever the window: their word, not ours."
        ),
    )


class OrderWithEstimateOut(OrderOut):
    """One order as `GET /v1/orders/{id}` shows it: with the expected wait while it waits
    (null otherwise), over the last 7 days, computed at most once a minute."""

    estimate: EstimateOut | None = None
