"""`autoprovision demo-history`: generated stock history for the simulated providers, marked
generated, over the days asked, never in live mode, and read by the summary and estimate."""

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.cli import main
from app.core.clock import utcnow
from app.core.ids import new_id
from app.core.market import Fees
from app.demo.history import write_demo_history
from app.providers.registry import simulated_specs
from app.settings import get_settings
from app.storage.db import create_engine, create_sessionmaker, session_scope
from app.storage.models import StockCoverage, StockInterval
from tests.factories import create_account
from tests.processes import clean_env


@pytest.fixture
def cli_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Point the in-process `autoprovision` command at this test's (migrated) database."""
    for name, value in clean_env(
        AUTOPROVISION_DATABASE_URL=database_url, AUTOPROVISION_MODE="demo"
    ).items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    yield database_url
    get_settings.cache_clear()


async def _rows(database_url: str) -> tuple[list[StockInterval], list[StockCoverage]]:
    engine = create_engine(database_url)
    try:
        async with session_scope(create_sessionmaker(engine)) as session:
            intervals = list((await session.execute(select(StockInterval))).scalars())
            windows = list((await session.execute(select(StockCoverage))).scalars())
            return intervals, windows
    finally:
        await engine.dispose()


async def _record_real_history(database_url: str, hours_ago: float) -> None:
    """A recorded (not generated) coverage window and interval starting `hours_ago`."""
    engine = create_engine(database_url)
    start = utcnow() - timedelta(hours=hours_ago)
    try:
        async with session_scope(create_sessionmaker(engine)) as session:
            session.add(
                StockCoverage(id=new_id("cov"), provider="verda", period_seconds=1.0,
                              started_at=start, last_read_at=start + timedelta(minutes=5),
                              ended_at=None, generated=False)
            )  # fmt: skip
            session.add(
                StockInterval(id=new_id("stk"), provider="verda", region="FIN-01", sku="x",
                              gpu_model="H100", gpu_count=8, interconnect=None, disk_gb=None,
                              disk_fixed=False, price_per_hour=Decimal("20"),
                              fee_percent=Decimal(0), fee_flat_per_hour=Decimal(0),
                              price_per_hour_with_fees=Decimal("20"), first_seen_at=start,
                              last_seen_at=start, gone_at=None, generated=False)
            )  # fmt: skip
    finally:
        await engine.dispose()


def test_it_writes_generated_rows_over_the_days_asked(
    cli_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = utcnow()
    assert main(["demo-history", "--days", "2", "--seed", "7"]) == 0
    out = capsys.readouterr().out
    intervals, windows = asyncio.run(_rows(cli_env))
    assert f"wrote {len(intervals)} generated intervals and {len(windows)} coverage" in out
    assert intervals and windows
    assert all(i.generated for i in intervals) and all(w.generated for w in windows)
    assert {w.provider for w in windows} == {s.name for s in simulated_specs()}
    assert all(i.gone_at is not None for i in intervals)  # all closed: nothing "in stock"
    assert all(w.ended_at is not None for w in windows)
    start = min(w.started_at for w in windows)
    end = max(w.last_read_at for w in windows)
    assert start == pytest.approx(before - timedelta(days=2), abs=timedelta(minutes=1))
    assert end == pytest.approx(before, abs=timedelta(minutes=1))
    assert min(i.first_seen_at for i in intervals) >= start
    assert max(i.gone_at or end for i in intervals) <= end
    # A few appearances an hour per key (some fall into the coverage gap and are not seen).
    keys = {(i.provider, i.region, i.sku) for i in intervals}
    assert 1 <= len(intervals) / len(keys) / 48 <= 3


def test_it_refuses_a_second_run_without_replace_and_replaces_only_generated_rows(
    cli_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo-history", "--days", "1", "--seed", "1"]) == 0
    first, _ = asyncio.run(_rows(cli_env))
    assert main(["demo-history", "--days", "1"]) == 1
    assert "--replace" in capsys.readouterr().err
    asyncio.run(_record_real_history(cli_env, hours_ago=3))
    assert main(["demo-history", "--days", "1", "--seed", "2", "--replace"]) == 0
    assert f"deleted {len(first)} generated intervals" in capsys.readouterr().out
    intervals, windows = asyncio.run(_rows(cli_env))
    real = [i for i in intervals if not i.generated]
    assert len(real) == 1 and len([w for w in windows if not w.generated]) == 1
    # Generated history ends where the recorded one begins: the two never overlap.
    real_start = real[0].first_seen_at
    assert all(w.last_read_at <= real_start for w in windows if w.generated)
    assert not {i.id for i in first} & {i.id for i in intervals}


def test_it_refuses_in_live_mode(
    cli_env: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AUTOPROVISION_MODE", "live")
    get_settings.cache_clear()
    assert main(["demo-history", "--days", "7"]) == 2
    assert "demo mode only" in capsys.readouterr().err
    intervals, windows = asyncio.run(_rows(cli_env))
    assert not intervals and not windows


async def test_summary_and_estimate_answer_on_generated_history(
    engine: AsyncEngine, client: httpx.AsyncClient
) -> None:
    fees = Fees(Decimal(5), Decimal("0.10"))  # the test app's
    await write_demo_history(create_sessionmaker(engine), days=7, fees=fees, periods={}, seed=3)
    account = await create_account(client)
    summary = await client.get(
        "/v1/stock/summary", params={"window": "7d", "gpu_model": "H100"}, headers=account.headers
    )
    assert summary.status_code == 200, summary.text
    body = summary.json()
    assert body["includes_generated"] is True
    assert body["data"] and all(k["gpu_model"] == "H100" for k in body["data"])
    assert all(k["appearances"] > 0 and k["hours_observed"] > 100 for k in body["data"])
    wants = {"gpu_model": "H100", "gpu_count": 8, "max_price_per_hour": "40",
             "providers": [s.name for s in simulated_specs()], "window": "7d"}  # fmt: skip
    estimate = await client.post("/v1/stock/estimate", json=wants, headers=account.headers)
    assert estimate.status_code == 200, estimate.text
    out = estimate.json()
    assert out["status"] == "ok" and out["includes_generated"] is True
    assert out["appearances"] > 0 and out["median_seconds"] is not None
