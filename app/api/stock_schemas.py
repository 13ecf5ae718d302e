"""Bodies of the stock endpoints: the estimate's request and the `window` parameter; the
history, summary and expected wait they answer with."""

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field

from app.api.order_schemas import NODES_DESCRIPTION, MachineWanted
from app.core.catalogue import GPU_MODELS, normalize_gpu_model
from app.core.errors import ValidationFailed
from app.core.market import MAX_NODES, OrderWants
from app.services.order_payload import MoneyOut
from app.services.stock.estimate import WindowEstimate
from app.stock.stats import Estimate
from app.stock.summary import KeySummary

_WINDOW = re.compile(r"^([1-9][0-9]{0,5})([hd])$")
DEFAULT_WINDOW = "7d"
# A summary or an estimate over a longer window is a costly read: it has its own budget
# (settings: `max_costly_reads_in_flight`).
COSTLY_WINDOW = timedelta(days=7)
COSTLY_READS = "stock windows longer than 7 days"
WindowParam = Annotated[
    str,
    Query(max_length=8, description='How far back to look: hours or days, e.g. "36h", "7d".'),
]
NodesParam = Annotated[int, Query(ge=1, le=MAX_NODES, description=NODES_DESCRIPTION)]


def _invalid(field: str, message: str) -> ValidationFailed:
    return ValidationFailed(f"{field}: {message}", details=[{"field": field, "message": message}])


def parse_window(text: str, *, retention_days: int, field: str = "window") -> timedelta:
    """A window such as `7d` or `36h`, from one hour up to the retention of stock history."""
    found = _WINDOW.fullmatch(text)
    if found is None:
        message = 'must be a number of hours or days, like "36h" or "7d"'
        raise _invalid(field, message)
    amount, unit = int(found.group(1)), found.group(2)
    window = timedelta(hours=amount) if unit == "h" else timedelta(days=amount)
    if window > timedelta(days=retention_days):
        raise _invalid(field, f"must be at most the {retention_days} days of history kept")
    return window


def parse_gpu_model(value: str | None) -> str | None:
    """The catalogue's spelling of a GPU model from a query parameter (422 when unknown)."""
    if value is None:
        return None
    model = normalize_gpu_model(value)
    if model is None:
        raise _invalid("gpu_model", f"unknown GPU model; known models: {', '.join(GPU_MODELS)}")
    return model


EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)  # nothing was in stock before; older is a mistake
LATEST = datetime(9999, 12, 30, tzinfo=UTC)  # a day short of the end, so a span still fits


def history_span(
    since: datetime | None, until: datetime | None, *, now: datetime, retention_days: int
) -> tuple[datetime, datetime]:
    """[since, until] in UTC (default: the retention up to now); 422 unless since is before
    until and both lie in 1970..9999."""
    end = _in_range("until", until) if until is not None else now
    if since is not None:
        start = _in_range("since", since)
    else:
        start = max(EARLIEST, end - timedelta(days=retention_days))
    if start > end:
        raise _invalid("since", "must not be after until")
    return start, end


def _in_range(field: str, moment: datetime) -> datetime:
    message = "must be between 1970-01-01 and 9999-12-30 (UTC)"
    try:
        in_utc = moment.astimezone(UTC)
    except OverflowError:
        raise _invalid(field, message) from None
    if not EARLIEST <= in_utc <= LATEST:
        raise _invalid(field, message)
    return in_utc


class EstimateRequest(MachineWanted):
    """Body of `POST /v1/stock/estimate`: an order's fields, and how far back to look."""

    window: Annotated[str, Field(max_length=8)] = DEFAULT_WINDOW

    def wants(self) -> OrderWants:
        """The request as the matcher sees an order."""
        return OrderWants(
            id="",
            created_at=datetime.now(UTC),
            providers=frozenset(str(p) for p in self.providers),
            gpu_model=self.gpu_model,
            gpu_count=self.gpu_count,
            max_price_per_hour=self.max_price_per_hour,
            regions=frozenset(r.upper() for r in self.regions) if self.regions else None,
            min_disk_gb=self.min_disk_gb,
            interconnect=self.interconnect,
            nodes=self.nodes,
            cluster_interconnect=self.cluster_interconnect,
        )


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

    @classmethod
    def of_window(cls, waited: WindowEstimate) -> "EstimateOut":
        """A window's estimate, in whole seconds."""
        return cls(
            **dict(WaitOut.present(waited.main)),
            nodes=waited.nodes,
            window=waited.window,
            since=waited.since,
            until=waited.until,
            price_curve=[WaitOut.present(point) for point in waited.curve],
            includes_generated=waited.includes_generated,
        )


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
