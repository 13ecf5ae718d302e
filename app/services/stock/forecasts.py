"""What each provider last said it plans to have, per region and GPU model (Hyperstack's
`planned_7_days`/`planned_30_days`): the provider's word, kept beside the stock history.

Written by the lease holder's watcher only, and only what changed: a forecast said again as it
was keeps its row (and `changed_at`), so how long the provider has said it shows.
"""

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.market import StockForecast
from app.storage.models import StoredForecast


async def record(
    session: AsyncSession, provider: str, said: Collection[StockForecast], *, read_at: datetime
) -> int:
    """Make `provider`'s stored forecasts what its read at `read_at` said: new and changed ones
    written as of then, ones no longer said deleted, the rest untouched. Rows written."""
    query = select(StoredForecast).where(StoredForecast.provider == provider)
    rows = (await session.execute(query)).scalars()
    stored = {(row.region, row.provider_model): row for row in rows}
    now = {(f.region, f.provider_model): f for f in said}
    written = 0
    for key, forecast in now.items():
        row = stored.get(key)
        if row is not None and _terms(row) == _terms_of(forecast):
            continue
        if row is None:
            row = StoredForecast(provider=provider, region=key[0], provider_model=key[1])
            session.add(row)
        row.gpu_model = forecast.gpu_model
        row.interconnect = None if forecast.interconnect is None else str(forecast.interconnect)
        row.within_7_days = forecast.within_7_days
        row.within_30_days = forecast.within_30_days
        row.changed_at = read_at
        written += 1
    for key, row in stored.items():
        if key not in now:
            await session.delete(row)
            written += 1
    await session.flush()
    return written


async def latest(
    session: AsyncSession,
    *,
    gpu_model: str | None = None,
    providers: Collection[str] | None = None,
) -> list[StoredForecast]:
    """The forecasts stored, of one GPU model and of some providers where given, by provider,
    region and the provider's GPU name."""
    query = select(StoredForecast).order_by(
        StoredForecast.provider, StoredForecast.region, StoredForecast.provider_model
    )
    if gpu_model is not None:
        query = query.where(StoredForecast.gpu_model == gpu_model)
    if providers:
        query = query.where(StoredForecast.provider.in_(providers))
    return list((await session.execute(query)).scalars())


def _terms(row: StoredForecast) -> tuple[object, ...]:
    return (row.gpu_model, row.interconnect, row.within_7_days, row.within_30_days)


def _terms_of(forecast: StockForecast) -> tuple[object, ...]:
    interconnect = None if forecast.interconnect is None else str(forecast.interconnect)
    return (forecast.gpu_model, interconnect, forecast.within_7_days, forecast.within_30_days)
