"""Stock forecasts as stored: the latest a provider said, rewritten only where it changed."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Interconnect, Provider
from app.core.market import StockForecast
from app.services.stock import forecasts as stock_forecasts
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import StoredForecast

T0 = datetime(2026, 12, 1, 12, tzinfo=UTC)
HYPERSTACK = Provider("hyperstack")
H100_PCIE = StockForecast(
    HYPERSTACK, "CANADA-1", "H100-80G-PCIe", "H100", Interconnect.PCIE, "10+", "25+"
)
H100_SXM = StockForecast(
    HYPERSTACK, "US-1", "H100-80G-SXM5", "H100", Interconnect.SXM, None, "100+"
)
L40 = StockForecast(HYPERSTACK, "CANADA-1", "L40", "L40", Interconnect.PCIE, "5", None)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


async def record(engine: AsyncEngine, minutes: int, *said: StockForecast, to: str = "") -> int:
    async with session_scope(create_sessionmaker(engine)) as session:
        provider = to or "hyperstack"
        return await stock_forecasts.record(session, provider, said, read_at=at(minutes))


async def stored(engine: AsyncEngine) -> dict[str, tuple[str | None, str | None, datetime]]:
    async with session_scope(create_sessionmaker(engine)) as session:
        rows = (await session.execute(select(StoredForecast))).scalars()
        return {
            f"{r.provider}/{r.region}/{r.provider_model}": (
                r.within_7_days,
                r.within_30_days,
                r.changed_at,
            )
            for r in rows
        }


async def test_a_forecast_said_again_keeps_when_it_changed_and_a_change_moves_it(
    engine: AsyncEngine,
) -> None:
    assert await record(engine, 0, H100_PCIE, L40) == 2
    assert await record(engine, 5, H100_PCIE, L40) == 0  # nothing changed: nothing written
    assert await stored(engine) == {
        "hyperstack/CANADA-1/H100-80G-PCIe": ("10+", "25+", at(0)),
        "hyperstack/CANADA-1/L40": ("5", None, at(0)),
    }
    more = replace(H100_PCIE, within_7_days="25+")
    assert await record(engine, 10, more, L40, H100_SXM) == 2
    assert await stored(engine) == {
        "hyperstack/CANADA-1/H100-80G-PCIe": ("25+", "25+", at(10)),
        "hyperstack/CANADA-1/L40": ("5", None, at(0)),  # the control: untouched
        "hyperstack/US-1/H100-80G-SXM5": (None, "100+", at(10)),
    }


async def test_a_forecast_no_longer_said_is_gone_and_other_providers_keep_theirs(
    engine: AsyncEngine,
) -> None:
    await record(engine, 0, H100_PCIE, L40)
    await record(engine, 0, replace(L40, provider=Provider("other")), to="other")
    assert await record(engine, 5, L40) == 1
    assert set(await stored(engine)) == {"hyperstack/CANADA-1/L40", "other/CANADA-1/L40"}
    assert await record(engine, 6) == 1  # read, and nothing planned any more
    assert set(await stored(engine)) == {"other/CANADA-1/L40"}


async def test_the_latest_of_one_gpu_model_and_some_providers(engine: AsyncEngine) -> None:
    await record(engine, 0, H100_PCIE, H100_SXM, L40)
    await record(engine, 0, replace(L40, provider=Provider("other")), to="other")
    async with session_scope(create_sessionmaker(engine)) as session:
        h100 = await stock_forecasts.latest(session, gpu_model="H100")
        l40 = await stock_forecasts.latest(session, gpu_model="L40", providers=["other"])
        every = await stock_forecasts.latest(session)
    assert [(r.region, r.provider_model, r.interconnect) for r in h100] == [
        ("CANADA-1", "H100-80G-PCIe", "pcie"),
        ("US-1", "H100-80G-SXM5", "sxm"),
    ]
    assert [(r.provider, r.provider_model) for r in l40] == [("other", "L40")]
    assert len(every) == 4
