"""How fast are the stock summary and the expected wait on 90 days of history?

Generates DAYS of history with `autoprovision demo-history`'s generator (`app/demo/history.py`)
for every offer key of the simulators' catalogues (three providers, 189 keys: no synthetic keys
are needed for "about 150"), a few appearances an hour each, loads the same rows into a fresh
SQLite file and a fresh PostgreSQL database (created on the server of --postgres-url and
dropped afterwards), starts the app in-process (API only, httpx's ASGI transport: no network
in the figures) and times REQUESTS requests of each (then measures, with tracemalloc, the most
memory one 90-day summary of every key holds at once):

  summary   GET /v1/stock/summary?gpu_model=M&window=W, M one of the catalogue's GPU models
  estimate  POST /v1/stock/estimate for M x N GPUs (a count the catalogue sells M in) on all
            three providers, at a max price from 0.8 to 1.3 times a list price of it

W cycles through 7d, 30d and 90d. Figures: median and p95 per endpoint, per window and overall,
per database; the history tables' rows and size (SQLite: pages of each table and index by
dbstat, else the file; PostgreSQL: pg_total_relation_size). Target: p95 under 200 ms.

    .venv/bin/python bench/stock_history.py [--days 90] [--requests 150] [--seed 1] \\
        [--postgres-url postgresql+asyncpg://postgres@127.0.0.1:5432/test] [--no-postgres] \\
        [--json bench/results/stock_history.json]
"""

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from asgi_lifespan import LifespanManager
from common import pg_admin
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.core.clock import utcnow
from app.core.market import Fees
from app.demo.history import Generated, Machine, generate, simulated_catalogue
from app.main import create_app
from app.services.stock import history as stock_history
from app.settings import Settings
from app.storage.db import create_engine, create_sessionmaker, migrate, session_scope

ADMIN_KEY = "bench-stock-history-admin-key"
out = sys.stdout
WINDOWS = ("7d", "30d", "90d")
TARGET_MS = 200.0
TABLES = ("stock_intervals", "stock_coverage", "stock_days")


@dataclass
class Timings:
    """Latencies in ms by endpoint and window."""

    ms: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    peak_mb: float = 0.0  # the most Python memory one 90-day summary of every key held at once

    def add(self, endpoint: str, window: str, ms: float) -> None:
        self.ms.setdefault((endpoint, window), []).append(ms)

    def of(self, endpoint: str, window: str | None = None) -> list[float]:
        return [
            v for (e, w), vs in self.ms.items() if e == endpoint and window in (None, w) for v in vs
        ]


def with_database(url: str, database: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(database=database).render_as_string(hide_password=False)


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


async def load(engine: AsyncEngine, made: Generated) -> float:
    """Migrate and insert the generated rows; seconds taken by the insert."""
    await migrate(engine)
    started = time.perf_counter()
    async with session_scope(create_sessionmaker(engine)) as session:
        await stock_history.insert_generated(session, made.intervals, made.windows)
    return time.perf_counter() - started


async def sizes(engine: AsyncEngine) -> dict[str, Any]:
    """Rows and bytes of the history tables (with their indexes)."""
    out: dict[str, Any] = {}
    async with engine.connect() as connection:
        for table in TABLES:
            rows = (await connection.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one()
            out[f"{table}_rows"] = rows
        if engine.dialect.name == "postgresql":
            for table in TABLES:
                query = text("SELECT pg_total_relation_size(:t)")
                out[f"{table}_bytes"] = (await connection.execute(query, {"t": table})).scalar()
            return out
        try:
            pages = await connection.execute(
                text("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")
            )
            by_name: dict[str, int] = {row[0]: row[1] for row in pages}
            indexes = await connection.execute(
                text("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'")
            )
            owner: dict[str, str] = {row[0]: row[1] for row in indexes}
            for table in TABLES:
                out[f"{table}_bytes"] = sum(
                    size
                    for name, size in by_name.items()
                    if name == table or owner.get(name) == table
                )
        except Exception:  # dbstat not compiled in: the whole file
            out["file_bytes_note"] = "dbstat unavailable: whole file"
    return out


def requests_plan(machines: list[Machine], count: int, seed: int) -> list[tuple[str, str, Any]]:
    """(endpoint, window, params or body) for `count` requests of each endpoint."""
    rng = random.Random(seed)
    models = sorted({m.gpu_model for m in machines})
    providers = sorted({m.provider for m in machines})
    plan: list[tuple[str, str, Any]] = []
    for k in range(count):
        window = WINDOWS[k % len(WINDOWS)]
        plan.append(("summary", window, {"gpu_model": rng.choice(models), "window": window}))
        machine = rng.choice(machines)
        price = machine.price_per_hour * rng.choice((8, 9, 10, 11, 12, 13)) / 10
        body = {
            "gpu_model": machine.gpu_model,
            "gpu_count": machine.gpu_count,
            "providers": providers,
            "max_price_per_hour": str(price.quantize(price.__class__("0.01"))),
            "window": window,
        }
        plan.append(("estimate", window, body))
    rng.shuffle(plan)
    return plan


async def measure(database_url: str, plan: list[tuple[str, str, Any]], days: int) -> Timings:
    settings = Settings(
        _env_file=None,
        database_url=database_url,
        admin_api_key=ADMIN_KEY,
        watcher=False,
        stock_history_days=max(days, 90),
        max_requests_in_flight=64,
    )
    app = create_app(settings)
    timings = Timings()
    async with LifespanManager(app, startup_timeout=60):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://b", timeout=120) as c:
            admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
            account = (await c.post("/v1/accounts", json={"name": "b"}, headers=admin)).json()
            headers = {"Authorization": f"Bearer {account['api_key']}"}
            for endpoint, _window, payload in plan[:6]:  # warm-up, not counted
                await _send(c, endpoint, payload, headers)
            for endpoint, window, payload in plan:
                started = time.perf_counter()
                await _send(c, endpoint, payload, headers)
                timings.add(endpoint, window, (time.perf_counter() - started) * 1000)
            tracemalloc.start()
            try:
                await _send(c, "summary", {"window": "90d"}, headers)  # every key
                timings.peak_mb = tracemalloc.get_traced_memory()[1] / 1e6
            finally:
                tracemalloc.stop()
    return timings


async def _send(
    client: httpx.AsyncClient, endpoint: str, payload: Any, headers: dict[str, str]
) -> None:
    if endpoint == "summary":
        response = await client.get("/v1/stock/summary", params=payload, headers=headers)
    else:
        response = await client.post("/v1/stock/estimate", json=payload, headers=headers)
    if response.status_code != 200:
        raise RuntimeError(f"{endpoint} answered {response.status_code}: {response.text[:300]}")


def report(name: str, timings: Timings, info: dict[str, Any]) -> dict[str, Any]:
    info = {**info, "summary_90d_every_key_peak_mb": round(timings.peak_mb, 1)}
    out.write(f"\n{name}: {info}\n")
    out.write(f"  {'endpoint':<9} {'window':<6} {'n':>4} {'median ms':>10} {'p95 ms':>8}\n")
    result: dict[str, Any] = {**info, "latency_ms": {}}
    for endpoint in ("summary", "estimate"):
        for window in (*WINDOWS, None):
            values = timings.of(endpoint, window)
            med, high = statistics.median(values), p95(values)
            label = window or "all"
            out.write(f"  {endpoint:<9} {label:<6} {len(values):>4} {med:>10.1f} {high:>8.1f}\n")
            result["latency_ms"][f"{endpoint} {label}"] = {"median": med, "p95": high}
    return result


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--requests", type=int, default=150, help="per endpoint and database")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--postgres-url", default="postgresql+asyncpg://postgres@127.0.0.1:5432/test"
    )
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    machines = simulated_catalogue()
    now = utcnow()
    started = time.perf_counter()
    made = generate(
        machines, since=now - timedelta(days=args.days), until=now, fees=Fees(), periods={},
        seed=args.seed,
    )  # fmt: skip
    out.write(
        f"generated {len(made.intervals)} intervals, {len(made.windows)} coverage windows for "
        f"{len({(m.provider, m.region, m.sku) for m in machines})} offer keys over {args.days} "
        f"days in {time.perf_counter() - started:.1f} s; {os.cpu_count()} CPUs; load average "
        f"{os.getloadavg()[0]:.2f} (shared machine)\n"
    )
    plan = requests_plan(machines, args.requests, args.seed)
    results: dict[str, Any] = {"days": args.days, "intervals": len(made.intervals)}
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite+aiosqlite:///{directory}/bench.db"
        engine = create_engine(url)
        try:
            loaded = await load(engine, made)
            info = {"insert_s": round(loaded, 1), **await sizes(engine)}
            info["file_bytes"] = os.path.getsize(f"{directory}/bench.db")
        finally:
            await engine.dispose()
        results["sqlite"] = report("sqlite", await measure(url, plan, args.days), info)
    if not args.no_postgres:
        name = f"ap_bench_stock_{uuid.uuid4().hex[:10]}"
        await pg_admin(args.postgres_url, f'CREATE DATABASE "{name}"')
        try:
            url = with_database(args.postgres_url, name)
            engine = create_engine(url)
            try:
                loaded = await load(engine, made)
                async with engine.connect() as connection:
                    await connection.execute(text("ANALYZE"))
                info = {"insert_s": round(loaded, 1), **await sizes(engine)}
            finally:
                await engine.dispose()
            results["postgresql"] = report("postgresql", await measure(url, plan, args.days), info)
        finally:
            await pg_admin(args.postgres_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    passed = all(
        v["p95"] < TARGET_MS
        for db in ("sqlite", "postgresql")
        if db in results
        for k, v in results[db]["latency_ms"].items()
        if k.endswith(" all")
    )
    out.write(f"\np95 under {TARGET_MS:.0f} ms on every database and endpoint: {passed}\n")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
