"""Request parts of the stock endpoints: the estimate's body and the `window` parameter."""

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import Query
from pydantic import Field

from app.api.order_schemas import NODES_DESCRIPTION, MachineWanted
from app.core.catalogue import GPU_MODELS, normalize_gpu_model
from app.core.errors import ValidationFailed
from app.core.market import MAX_NODES, OrderWants

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
