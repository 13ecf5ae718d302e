"""Stock history: what was in stock when, per offer key in summary, and the expected wait."""

from contextlib import AbstractContextManager, nullcontext
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import AwareDatetime

from app.api.deps import CurrentAccount, SessionDep, SettingsDep
from app.api.limits import costly_read
from app.api.pagination import PageRequest, paged
from app.api.params import OfferedProvider
from app.api.shares import account_share
from app.api.stock_schemas import (
    COSTLY_READS,
    COSTLY_WINDOW,
    DEFAULT_WINDOW,
    CoverageOut,
    EstimateOut,
    EstimateRequest,
    ForecastOut,
    HistoryOut,
    KeySummaryOut,
    NodesParam,
    StockIntervalOut,
    SummaryOut,
    WindowParam,
    history_span,
    parse_gpu_model,
    parse_window,
)
from app.api.strict_json import StrictJsonRoute
from app.core.clock import utcnow
from app.core.errors import ValidationFailed
from app.core.market import Fees
from app.core.text import OneLine, quote
from app.providers.registry import offered_providers
from app.services.stock import estimate as stock_estimate
from app.services.stock import forecasts as stock_forecasts
from app.services.stock import reads as stock_reads
from app.services.stock.reads import HistoryFilter

router = APIRouter(route_class=StrictJsonRoute, prefix="/v1/stock", tags=["stock"])
GpuCount = Annotated[int | None, Query(ge=1, le=64)]
GpuModel = Annotated[str | None, Query(max_length=40, description="Case-insensitive.")]


def _providers(values: list[str] | None) -> list[str] | None:
    """Provider names from repeated and/or comma-separated values (422 for unknown ones)."""
    if not values:
        return None
    names = [n.strip().lower() for v in values for n in v.split(",") if n.strip()]
    known = [str(p) for p in offered_providers()]
    unknown = [n for n in names if n not in known]
    if unknown:
        message = f"unknown provider {quote(unknown[0])}; known: {', '.join(known)}"
        raise ValidationFailed(
            f"providers: {message}", details=[{"field": "providers", "message": message}]
        )
    return list(dict.fromkeys(names)) or None


def _costly_budget(
    request: Request, account_id: str, window: timedelta
) -> AbstractContextManager[None]:
    """A place in the costly reads' budget for a window longer than `COSTLY_WINDOW`."""
    if window <= COSTLY_WINDOW:
        return nullcontext()
    return costly_read(request.app.state.costly_reads, account_share(account_id), COSTLY_READS)


@router.get("/history")
async def history(
    _account: CurrentAccount,
    session: SessionDep,
    settings: SettingsDep,
    page: Annotated[PageRequest, paged(default_limit=50)],
    gpu_model: GpuModel = None,
    gpu_count: GpuCount = None,
    nodes: NodesParam = 1,
    provider: OfferedProvider | None = None,
    region: Annotated[str | None, Query(max_length=64), OneLine] = None,
    since: AwareDatetime | None = None,
    until: AwareDatetime | None = None,
) -> HistoryOut:
    """Intervals in stock at some moment of [since, until], newest first, with the coverage
    windows of the same span (default: the whole history kept); only offers of `nodes` machines
    (default: single machines)."""
    since, until = history_span(
        since, until, now=utcnow(), retention_days=settings.stock_history_days
    )
    where = HistoryFilter(
        since=since,
        until=until,
        gpu_model=parse_gpu_model(gpu_model),
        gpu_count=gpu_count,
        nodes=nodes,
        provider=str(provider) if provider else None,
        region=region,
    )
    rows = await stock_reads.history_page(
        session, where=where, cursor=page.cursor, limit=page.fetch
    )
    shown, next_cursor = page.split(rows, key=lambda r: r.id)
    windows = await stock_reads.coverage(
        session, since=since, until=until, providers=[where.provider] if where.provider else None
    )
    return HistoryOut(
        nodes=nodes,
        data=[StockIntervalOut.model_validate(r) for r in shown],
        next_cursor=next_cursor,
        since=since,
        until=until,
        coverage=[CoverageOut.model_validate(w) for w in windows],
    )


@router.get("/summary")
async def summary(
    request: Request,
    account: CurrentAccount,
    session: SessionDep,
    settings: SettingsDep,
    gpu_model: GpuModel = None,
    gpu_count: GpuCount = None,
    nodes: NodesParam = 1,
    providers: Annotated[list[str] | None, Query(max_length=10)] = None,
    window: WindowParam = DEFAULT_WINDOW,
) -> SummaryOut:
    """Per provider, region and SKU over the window: appearances, time in stock, gaps, prices
    with the current fees, last seen, and hours observed; only offers of `nodes` machines
    (default: single machines). With them, what the providers last said they plan to have of
    the GPU model (`forecasts`: their word, not ours)."""
    span = parse_window(window, retention_days=settings.stock_history_days)
    now = utcnow()
    names = _providers(providers)
    model = parse_gpu_model(gpu_model)
    with _costly_budget(request, account.id, span):
        keys = await stock_reads.summary(
            session,
            fees=Fees(settings.fee_percent, settings.fee_flat_per_hour),
            since=now - span,
            now=now,
            gpu_model=model,
            gpu_count=gpu_count,
            providers=names,
            nodes=nodes,
        )
        generated = await stock_reads.includes_generated(
            session, since=now - span, until=now, providers=names
        )
    forecasts = await stock_forecasts.latest(session, gpu_model=model, providers=names)
    return SummaryOut(
        nodes=nodes,
        window=window,
        since=now - span,
        until=now,
        data=[KeySummaryOut.present(k) for k in keys],
        includes_generated=generated,
        forecasts=[ForecastOut.model_validate(f) for f in forecasts],
    )


@router.post("/estimate")
async def estimate(
    request: Request,
    body: EstimateRequest,
    account: CurrentAccount,
    session: SessionDep,
    settings: SettingsDep,
) -> EstimateOut:
    """How long an order like this would have waited over the window, at its max price and at
    the observed prices around it."""
    span = parse_window(body.window, retention_days=settings.stock_history_days)
    with _costly_budget(request, account.id, span):
        waited = await stock_estimate.expected_wait(
            session,
            wants=body.wants(),
            fees=Fees(settings.fee_percent, settings.fee_flat_per_hour),
            window=span,
        )
    return EstimateOut.of_window(waited)
