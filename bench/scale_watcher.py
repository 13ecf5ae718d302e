"""Does the watcher keep up with 10,000 waiting orders? Measured end to end over HTTP.

Starts the provider simulators and the service (`autoprovision serve`, demo mode pointed at
them, rate limits on) as separate processes, like `bench/stock_to_create.py`. The simulators run
from this script (`--serve-sim`, a child process) inside an ASGI wrapper that logs, for every
request the simulators answer, its method, path, the moment its ASGI call began and the moment
its last response byte was handed to the socket (`time.time()`; the simulators' own create log
and stock changes use the same clock of the same machine). The orders are written straight
into the database with the app's own services (`place_order`, as the API does) before the
service starts.

Three measurements:

(a) Read answer -> create leaves, with 10,000 waiting orders. One machine per provider is put
    in stock at a random moment of the poll cycle (all three providers at once, ROUNDS times
    each, after WARMUP rounds that are not counted). Per appearance:
      - the *trigger read* is the first stock read of that provider that began after the stock
        change and can show the machine (a read is every stock-read request of one poll:
        Verda's full list `/instance-availability`, or the machine's own type's path with the
        full list read right after its `true`; reads of other types' paths cannot show it and
        do not count; Hyperstack `/core/flavors` + `/core/stocks`, sent together;
        QuantaCloud every `/offers` page), or, if the create arrived before that read was
        answered, the last read answered before the create;
      - *answered* is when the last response byte of that read left the simulator;
      - *create leaves* is when the create request (Verda `POST /instances`, Hyperstack
        `POST /core/virtual-machines`, QuantaCloud `POST /deployments`) reached the simulator's
        ASGI app.
    latency = create arrival - read answered. It contains two loopback hops and the service's
    whole hot path: response parsing, offers, matching against every waiting order, the claim
    commit, building and sending the create, and any time the service's event loop was busy with
    something else (re-reading the waiting orders, other providers' passes). `later_reads`
    counts rounds where another full read of that provider was answered before the create
    left (the service acted late or not on the first read that showed the stock). Target: p99
    under 20 ms. For context it also reports the time from the stock change to the create
    (what `stock_to_create.py` measures) and the service's own metric
    `autoprovision_stock_to_create_seconds` (from the read that first saw the offer, after its
    answer was parsed, to the create being launched).
(b) Provider requests per minute: every request the service sends to the simulators' provider
    APIs (not their `/_sim` control API), counted over WINDOW seconds of steady state (stock
    that no order can afford on every provider, no stock changes, no creates), once with
    10,000 waiting orders and once with 10. Target: the same (within 3 %, or 3 requests a
    minute: jobs on a fixed clock, such as a VM listing once a minute, land in a window or not).
(c) Peak RSS of the service process (`VmHWM` in /proc/<pid>/status) at the end of the
    10,000-order run: after its steady window and every round of (a), with all three pollers
    running the whole time. Target: under 250 MB.

The order mix (seeded, reproducible): GPU models and counts from the three simulators'
catalogues, one to three providers (sometimes one that does not sell that machine), 20 % with
regions, 10 % with a minimum disk, 10 % with an interconnect, 25 % with an SSH key, 20 % expiring
in 30 days, over 200 accounts. A few machines are kept in stock on every provider at prices
above what every order for them will pay (so every read runs a full match and produces near
misses); every other machine the 10,000 want never appears. On top of the 10,000 there are
WARMUP + ROUNDS + 5 orders per provider for the machine that will appear, so at least 10,000
orders wait throughout.

    .venv/bin/python bench/scale_watcher.py [--orders 10000] [--rounds 120] [--window 60] \\
        [--postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test] \\
        [--json bench/results/scale_watcher.json]
"""

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
from common import (
    ROOT,
    busy_percent,
    cpu_seconds,
    free_port,
    git_revision,
    is_stock_read_path,
    load_average,
    machine_cpu,
    mount_path,
    pg_admin,
    planned_periods,
    providers,
    service_env,
    sim_ready_url,
    start,
    wait_up,
)
from placing import place_for

from app.providers.verda import limits as verda_limits
from app.simulators.control import SimControl

ADMIN_KEY = "bench-admin-key-0123456789"
PROVIDERS = tuple(providers())
# The machine that appears, per provider (cheap, as in stock_to_create.py).
MACHINES = {
    "verda": {"sku": "1A6000.10V", "region": "FIN-01", "gpu_model": "RTX-A6000", "gpu_count": 1},
    "hyperstack": {
        "sku": "n3-RTX-A6000x1",
        "region": "CANADA-1",
        "gpu_model": "RTX-A6000",
        "gpu_count": 1,
    },
    "quantacloud": {"sku": "l40s-x1", "region": "us-east-1", "gpu_model": "L40S", "gpu_count": 1},
}
# Extra providers a target order may also accept: ones that never have that machine in stock,
# so one provider's appearance never uses up another provider's orders.
TARGET_ALSO = {"verda": "quantacloud", "hyperstack": "quantacloud", "quantacloud": "verda"}
# Always in stock, always above every order's max for that machine: every read matches in full.
BACKGROUND_STOCK = {
    "verda": [
        ("8H100.80S.176V", "FIN-01", 2),
        ("1H100.80S.30V", "FIN-02", 3),
        ("8B200.240V", "FIN-01", 1),
    ],
    "hyperstack": [
        ("n3-H100x8", "CANADA-1", 2),
        ("n3-A100x1", "CANADA-1", 4),
        ("n3-L40x1", "NORWAY-1", 5),
    ],
    "quantacloud": [
        ("h100-sxm-x8", "us-east-1", 2),
        ("a100-80gb-sxm-x1", "us-east-1", 3),
        ("b200-sxm-x8", "us-east-1", 1),
    ],
}
PERIODS = planned_periods()
# Paths (below the provider's mount) of a create.
CREATE_PATHS = {
    "verda": "/v1/instances",
    "hyperstack": "/v1/core/virtual-machines",
    "quantacloud": "/api/v1/deployments",
}
# Requests of one read (and Verda's full list right after a type's `true`) start closer together
# than this; planned reads of one provider are at least 0.1 s apart and mostly 0.25 s or more.
READ_GAP_SECONDS = 0.1
SSH_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFkkEa055eQN0BuHueKXxmUstrKN6gSW77TuOls8f542 bench@host"
)
TARGET_P99_MS = 20.0
TARGET_RSS_MB = 250.0  # per process, with 10,000 orders
TARGET_RSS_MB_100K = 400.0  # ... and with more (up to 100,000)
TARGET_PLACED_PER_SECOND = 500.0  # across the replicas, for a minute
TARGET_PLACE_P99_MS = 1000.0
SAME_RATE_TOLERANCE = 0.03
# Jobs on a fixed clock (the reconciler's VM listing every 60 s) land 0 or 1 times in a window.
SAME_RATE_SLACK = 3.0
VERDA_PROJECT_LIMIT = verda_limits.RATE_LIMITS[0].requests  # 500 a minute, every request
Entry = tuple[str, str, str, float, float, int]  # method, path, query, started, finished, status


# --- the simulators, with a request log --------------------------------------------------------


class RequestLog:
    """ASGI wrapper: logs every request's path, start and end; serves the log at /_bench/log."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app
        self.entries: list[Entry] = []

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
        send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        query = scope.get("query_string", b"").decode()
        if path == "/_bench/log":
            since = int(parse_qs(query).get("since", ["0"])[0])
            body = json.dumps(self.entries[since:]).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        started = time.time()
        status = 0

        async def logged(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self.entries.append((scope["method"], path, query, started, time.time(), status))

        await self.app(scope, receive, logged)


def serve_sim(port: int) -> None:
    """The three simulators on one port, as `autoprovision sim` serves them, plus the log."""
    import uvicorn

    from app.simulators.app import create_simulator_app

    uvicorn.run(
        RequestLog(create_simulator_app()), host="127.0.0.1", port=port, log_level="warning"
    )


class LogReader:
    """This script's copy of the simulators' request log, fetched incrementally."""

    def __init__(self, sim: httpx.AsyncClient) -> None:
        self.sim = sim
        self.entries: list[Entry] = []
        self._lock = asyncio.Lock()

    async def refresh(self) -> list[Entry]:
        async with self._lock:
            fresh = (await self.sim.get("/_bench/log", params={"since": len(self.entries)})).json()
            self.entries.extend(tuple(e) for e in fresh)
        return self.entries


def provider_of(path: str) -> tuple[str, str] | None:
    """(provider, path below its mount) for a provider API request; None for `/_sim` calls."""
    for provider in PROVIDERS:
        prefix = mount_path(provider)
        if path.startswith(prefix + "/"):
            rest = path[len(prefix) :]
            return None if rest.startswith("/_sim") else (provider, rest)
    return None


def can_show(path: str, sku: str) -> bool:
    """Whether a stock read request can show `sku`: Verda's per-type path shows only its own."""
    _, _, instance_type = path.partition("/instance-availability/")
    return not instance_type or instance_type == sku


def group_reads(entries: list[Entry], provider: str, sku: str) -> list[tuple[float, float]]:
    """The provider's stock reads that can show `sku`, as (began, answered): requests that
    start close together."""
    starts = sorted(
        (e[3], e[4])
        for e in entries
        if e[0] == "GET"
        and (where := provider_of(e[1])) is not None
        and where[0] == provider
        and is_stock_read_path(provider, where[1])
        and can_show(where[1], sku)
    )
    reads: list[list[float]] = []
    for started, finished in starts:
        if reads and started - reads[-1][2] < READ_GAP_SECONDS:
            reads[-1][1] = max(reads[-1][1], finished)
            reads[-1][2] = started
        else:
            reads.append([started, finished, started])
    return [(r[0], r[1]) for r in reads]


# --- orders --------------------------------------------------------------------------------------


def catalogue() -> dict[str, list[Any]]:
    """Every simulator's catalogue entries (the app's own simulators)."""
    from app.simulators.app import create_simulator_app

    simulators = create_simulator_app().state.simulators
    return {provider: list(simulators[provider].catalog_entries) for provider in PROVIDERS}


def order_mix(count: int, targets_per_provider: int, rng: random.Random) -> list[dict[str, Any]]:
    """`count` orders that never get a machine, plus orders for the machine that appears."""
    entries = catalogue()
    kinds: dict[tuple[str, int], dict[str, list[Any]]] = {}
    for provider, provider_entries in entries.items():
        for entry in provider_entries:
            kinds.setdefault((entry.gpu_model, entry.gpu_count), {}).setdefault(
                provider, []
            ).append(entry)
    targets = {(m["gpu_model"], m["gpu_count"]) for m in MACHINES.values()}
    # The lowest price at which each machine is kept in stock: orders for it stay below.
    in_stock_floor: dict[tuple[str, int], Decimal] = {}
    for provider, rows in BACKGROUND_STOCK.items():
        for sku, region, _ in rows:
            entry = next(e for e in entries[provider] if (e.sku, e.region) == (sku, region))
            kind = (entry.gpu_model, entry.gpu_count)
            in_stock_floor[kind] = min(
                in_stock_floor.get(kind, entry.price_per_hour), entry.price_per_hour
            )
    choices = [k for k in kinds if k not in targets]
    expiry = (datetime.now(UTC) + timedelta(days=30)).isoformat()
    orders: list[dict[str, Any]] = []
    for n in range(count):
        kind = rng.choice(choices)
        sellers = kinds[kind]
        list_price = min(e.price_per_hour for rows in sellers.values() for e in rows)
        if kind in in_stock_floor:
            factor = Decimal(rng.randint(60, 97)) / 100
            max_price = in_stock_floor[kind] * factor
        else:
            max_price = list_price * Decimal(rng.randint(80, 150)) / 100
        how_many = rng.choices((1, 2, 3), weights=(5, 3, 2))[0]
        providers = set(rng.sample(sorted(sellers), min(how_many, len(sellers))))
        if how_many == 3:
            providers = set(PROVIDERS)
        order: dict[str, Any] = {
            "gpu_model": kind[0],
            "gpu_count": kind[1],
            "providers": sorted(providers),
            "max_price_per_hour": str(max_price.quantize(Decimal("0.01"))),
            "name": f"bench {n}",
        }
        if rng.random() < 0.2:
            regions = sorted({e.region for rows in sellers.values() for e in rows})
            order["regions"] = rng.sample(regions, min(len(regions), rng.randint(1, 2)))
        if rng.random() < 0.1:
            order["min_disk_gb"] = rng.choice((200, 500, 1000))
        if rng.random() < 0.1:
            interconnects = {e.interconnect for rows in sellers.values() for e in rows}
            order["interconnect"] = rng.choice(sorted(i for i in interconnects if i) or ["pcie"])
        if rng.random() < 0.25:
            order["ssh_public_key"] = SSH_KEY
        if rng.random() < 0.2:
            order["expires_at"] = expiry
        orders.append(order)
    for provider, machine in MACHINES.items():
        for n in range(targets_per_provider):
            also = [TARGET_ALSO[provider]] if rng.random() < 0.4 else []
            orders.append(
                {
                    "gpu_model": machine["gpu_model"],
                    "gpu_count": machine["gpu_count"],
                    "providers": sorted([provider, *also]),
                    "max_price_per_hour": "5.00",
                    "name": f"bench target {provider} {n}",
                }
            )
    rng.shuffle(orders)  # the machine that appears goes to whichever of its orders is oldest
    return orders


async def seed(
    database_url: str, orders: list[dict[str, Any]], accounts: int, *, placed: int | None = None
) -> tuple[float, list[str]]:
    """Migrate, make `accounts` funded accounts and place `orders` among them; seconds taken,
    and the accounts' API keys. With `placed`, only the first `placed` orders go through
    `place_order`; each of the rest is a copy of one of those (every column but its id and
    name) made in SQL: placing 100,000 one by one takes a quarter of an hour here."""
    from app.api.order_schemas import OrderCreate
    from app.services import ledger, placing
    from app.services.accounts import create_account
    from app.storage.db import create_engine, create_sessionmaker, migrate, session_scope

    started = time.monotonic()
    engine = create_engine(database_url)
    try:
        await migrate(engine)
        sessionmaker = create_sessionmaker(engine)
        account_ids, keys = [], []
        async with session_scope(sessionmaker) as session:
            for n in range(accounts):
                account, key = await create_account(session, name=f"bench {n}")
                keys.append(key)
                await ledger.credit(session, account_id=account.id, amount=Decimal(100_000))
                account_ids.append(account.id)
        through = len(orders) if placed is None else min(placed, len(orders))
        if through < len(orders):  # every target order is placed; copies are of the others
            orders = sorted(orders, key=lambda body: not is_target(body))
        for first in range(0, through, 500):
            async with session_scope(sessionmaker) as session:
                for n, body in enumerate(orders[first : min(first + 500, through)], start=first):
                    await placing.place_order(
                        session,
                        account_id=account_ids[n % accounts],
                        request=OrderCreate.model_validate(body).new_order(),
                        enabled=body["providers"],
                        max_waiting=len(orders),
                    )
        if through < len(orders):
            await copy_orders(engine, len(orders) - through)
    finally:
        await engine.dispose()
    return time.monotonic() - started, keys


def is_target(body: dict[str, Any]) -> bool:
    """An order for the machine that appears in the rounds."""
    return str(body.get("name", "")).startswith("bench target")


async def copy_orders(engine: Any, count: int) -> None:
    """`count` more waiting orders, each a copy of a placed one that is not a target's, with
    its own id (and no timeline line: the watcher does not read those)."""
    from sqlalchemy import inspect, text

    async with engine.begin() as connection:
        columns = await connection.run_sync(
            lambda sync: [c["name"] for c in inspect(sync).get_columns("orders")]
        )
        postgres = connection.dialect.name == "postgresql"
        fresh_id = (
            "'ord_' || substr(md5(random()::text || clock_timestamp()::text), 1, 22)"
            if postgres
            else "'ord_' || lower(hex(randomblob(11)))"
        )
        kept = [c for c in columns if c != "id"]
        source = (
            "SELECT {cols} FROM orders WHERE status = 'waiting' "
            "AND name NOT LIKE 'bench target%' ORDER BY id"
        ).format(cols=", ".join(kept))
        placed = (await connection.execute(text(f"SELECT count(*) FROM ({source}) AS s"))).scalar()
        assert placed, "nothing to copy"
        done = 0
        while done < count:
            batch = min(count - done, int(placed))
            await connection.execute(
                text(
                    f"INSERT INTO orders (id, {', '.join(kept)}) "
                    f"SELECT {fresh_id}, {', '.join(kept)} FROM ({source} LIMIT {batch}) AS s"
                )
            )
            done += batch


async def count_by_status(database_url: str) -> dict[str, int]:
    """Orders by status, read straight from the database."""
    from sqlalchemy import text

    from app.storage.db import create_engine

    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            query = text("SELECT status, count(*) FROM orders GROUP BY status")
            rows = (await connection.execute(query)).all()
    finally:
        await engine.dispose()
    return {str(status): int(n) for status, n in rows}


@contextlib.asynccontextmanager
async def fresh_database(label: str, workdir: Path, postgres: str | None) -> AsyncIterator[str]:
    """The URL of a new, empty database for one service run: an SQLite file in `workdir`, or,
    with `postgres` (a server's URL), a database made on that server and dropped after."""
    if postgres is None:
        yield f"sqlite+aiosqlite:///{workdir / f'{label}.db'}"
        return
    from sqlalchemy.engine import make_url

    name = f"ap_scale_{label}_{os.getpid()}"
    await pg_admin(postgres, f'CREATE DATABASE "{name}"')
    try:
        yield make_url(postgres).set(database=name).render_as_string(hide_password=False)
    finally:
        await pg_admin(postgres, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- processes -----------------------------------------------------------------------------------


def service_pid(process: subprocess.Popen[bytes], *, profiled: bool) -> int:
    """The service's own pid: under py-spy, the one child of py-spy."""
    if not profiled:
        return process.pid
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
    return int(children[0])


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in kB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0])
    return values


# --- measuring -----------------------------------------------------------------------------------


async def set_background_stock(sim: SimControl) -> None:
    for provider in PROVIDERS:
        await sim.reset(provider)
        for sku, region, quantity in BACKGROUND_STOCK[provider]:
            await sim.stock(provider, sku, region, quantity)


async def steady_window(seconds: float, pids: list[int], log: LogReader) -> dict[str, Any]:
    """Provider requests the service sends over `seconds` of steady state, and its CPU use
    (all its replicas')."""
    first = len(await log.refresh())
    cpu_before, began, machine_before = cpu_seconds(*pids), time.monotonic(), machine_cpu()
    await asyncio.sleep(seconds)
    entries = (await log.refresh())[first:]
    elapsed = time.monotonic() - began
    cpu = cpu_seconds(*pids) - cpu_before
    per_provider: dict[str, Any] = {}
    for provider in PROVIDERS:
        paths = Counter(
            f"{e[0]} {where[1]}"
            for e in entries
            if (where := provider_of(e[1])) is not None and where[0] == provider
        )
        statuses = Counter(
            e[5]
            for e in entries
            if (where := provider_of(e[1])) is not None and where[0] == provider
        )
        total = sum(paths.values())
        per_provider[provider] = {
            "requests": total,
            "per_minute": round(total * 60 / elapsed, 1),
            "by_path": dict(sorted(paths.items())),
            "by_status": {str(k): v for k, v in sorted(statuses.items())},
        }
    return {
        "seconds": round(elapsed, 1),
        "service_cpu_percent": round(100 * cpu / elapsed, 1),
        "machine_busy_percent": busy_percent(machine_before),
        "providers": per_provider,
    }


async def one_provider(
    provider: str,
    rounds: int,
    warmup: int,
    sim: SimControl,
    log: LogReader,
    rng: random.Random,
) -> list[dict[str, float]]:
    """Put the provider's machine in stock `warmup + rounds` times; one sample per round."""
    machine = MACHINES[provider]
    sku, region = str(machine["sku"]), str(machine["region"])
    period = PERIODS[provider]
    samples = []
    for n in range(warmup + rounds):
        await asyncio.sleep(0.3 + rng.uniform(0, 2 * period))
        seen = len(await sim.creates(provider))
        changed_at = await sim.stock(provider, sku, region, 1)
        deadline = time.monotonic() + 15
        while True:
            creates = await sim.creates(provider)
            if len(creates) > seen:
                create = creates[seen]
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{provider}: no create 15 s after stock appeared")
            await asyncio.sleep(0.05)
        await sim.stock(provider, sku, region, 0)
        if n < warmup:
            continue
        arrived = None
        for _ in range(100):
            entries = await log.refresh()
            arrived = min(
                (
                    e[3]
                    for e in entries
                    if e[0] == "POST"
                    and provider_of(e[1]) == (provider, CREATE_PATHS[provider])
                    and e[3] >= changed_at
                ),
                default=None,
            )
            if arrived is not None:
                break
            await asyncio.sleep(0.05)
        if arrived is None:
            raise RuntimeError(f"{provider}: the create is not in the request log")
        reads = group_reads(entries, provider, sku)
        trigger = next((r for r in reads if r[0] >= changed_at), None)
        if trigger is None or trigger[1] > arrived:
            # The create beat the first read that began after the change: a read that
            # straddled the change showed the stock. Take the last read answered before it.
            trigger = max((r for r in reads if r[1] <= arrived), key=lambda r: r[1])
        later = sum(1 for r in reads if trigger[1] < r[1] <= arrived)
        samples.append(
            {
                "read_to_create": arrived - trigger[1],
                "read_to_create_log": float(create["received_at"]) - trigger[1],
                "stock_to_create": float(create["received_at"]) - changed_at,
                "later_reads": float(later),
            }
        )
    return samples


def percentile(samples: list[float], q: int) -> float:
    if len(samples) < 2:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1]


def summary_ms(samples: list[float]) -> dict[str, float]:
    return {
        "samples": len(samples),
        "median_ms": round(statistics.median(samples) * 1000, 1),
        "p90_ms": round(percentile(samples, 90) * 1000, 1),
        "p99_ms": round(percentile(samples, 99) * 1000, 1),
        "max_ms": round(max(samples) * 1000, 1),
        "min_ms": round(min(samples) * 1000, 1),
    }


def stock_to_create_metric(text: str) -> dict[str, Any]:
    """The service's `autoprovision_stock_to_create_seconds` histogram, per provider."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.startswith("autoprovision_stock_to_create_seconds"):
            continue
        name, _, value = line.rpartition(" ")
        labels = dict(
            part.split("=", 1) for part in name[name.index("{") + 1 : -1].split(",") if "=" in part
        )
        provider = labels.get("provider", "").strip('"')
        row = out.setdefault(provider, {"buckets": {}})
        if "_bucket" in name:
            row["buckets"][labels["le"].strip('"')] = float(value)
        elif name.split("{")[0].endswith("_sum"):
            row["sum"] = float(value)
        elif name.split("{")[0].endswith("_count"):
            row["count"] = float(value)
    for row in out.values():
        count = row.get("count", 0)
        row["mean_ms"] = round(1000 * row.get("sum", 0) / count, 1) if count else None
        row["share_within_10ms"] = (
            round(row["buckets"].get("0.01", 0) / count, 3) if count else None
        )
        row["share_within_25ms"] = (
            round(row["buckets"].get("0.025", 0) / count, 3) if count else None
        )
    return out


async def service_run(
    *,
    label: str,
    orders: list[dict[str, Any]],
    accounts: int,
    workdir: Path,
    sim_port: int,
    sim: SimControl,
    log: LogReader,
    window: float,
    rounds: int,
    warmup: int,
    rng: random.Random,
    database_url: str,
    profile: Path | None = None,
    replicas: int = 1,
    placing: tuple[float, int] = (0.0, 0),
    placed: int | None = None,
    settle: float = 10.0,
) -> dict[str, Any]:
    """Seed a fresh database, start the service (`replicas` processes) on it, measure, stop.
    With `placing` (seconds, clients): then orders placed as fast as the replicas take them."""
    seed_seconds, keys = await seed(database_url, orders, accounts, placed=placed)
    waiting_at_start = (await count_by_status(database_url)).get("waiting", 0)
    await set_background_stock(sim)
    processes: list[subprocess.Popen[bytes]] = []
    api_ports = []
    for replica in range(1, replicas + 1):
        api_ports.append(free_port())
        env = service_env(database_url, ADMIN_KEY, sim_port, api_ports[-1])
        command = [sys.executable, "-m", "app", "serve"]
        if profile is not None and replica == 1:  # py-spy starts the service and samples it
            spy = [str(Path(sys.executable).parent / "py-spy"), "record"]
            command = [*spy, "-r", "100", "-f", "raw", "-o", str(profile.resolve()), "--", *command]
        processes.append(start(command, env, workdir / f"service-{label}-{replica}.log"))
    report: dict[str, Any] = {
        "orders_seeded": len(orders),
        "seed_seconds": round(seed_seconds, 1),
        "waiting_at_start": waiting_at_start,
        "replicas": replicas,
        "orders_placed_one_by_one": placed,
        "settle_seconds": settle,
    }
    try:
        for port, process in zip(api_ports, processes, strict=True):
            await wait_up(f"http://127.0.0.1:{port}/healthz", process)
        pids = [
            service_pid(p, profiled=profile is not None and n == 0) for n, p in enumerate(processes)
        ]
        await asyncio.sleep(settle)  # first reads, price lists, token (and notes): then steady
        report["load_average_before"] = load_average()
        report["steady"] = await steady_window(window, pids, log)
        if rounds:
            began = len(await log.refresh())
            cpu_before, t0, machine_before = cpu_seconds(*pids), time.monotonic(), machine_cpu()
            results = await asyncio.gather(
                *(one_provider(p, rounds, warmup, sim, log, rng) for p in PROVIDERS)
            )
            report["rounds_cpu_percent"] = round(
                100 * (cpu_seconds(*pids) - cpu_before) / (time.monotonic() - t0), 1
            )
            report["rounds_machine_busy_percent"] = busy_percent(machine_before)
            report["rounds_seconds"] = round(time.monotonic() - t0, 1)
            report["rounds_requests"] = len((await log.refresh())[began:])
            per_provider: dict[str, Any] = {}
            everything: dict[str, list[float]] = {}
            for provider, samples in zip(PROVIDERS, results, strict=True):
                row: dict[str, Any] = {}
                for measure in ("read_to_create", "read_to_create_log", "stock_to_create"):
                    values = [s[measure] for s in samples]
                    row[measure] = summary_ms(values)
                    everything.setdefault(measure, []).extend(values)
                row["later_reads_rounds"] = sum(1 for s in samples if s["later_reads"] > 0)
                row["slowest_read_to_create_ms"] = sorted(
                    round(s["read_to_create"] * 1000, 1) for s in samples
                )[-5:]
                per_provider[provider] = row
            report["latency"] = {
                "providers": per_provider,
                "all": {m: summary_ms(v) for m, v in everything.items()},
            }
            # The replica that held the watcher's lease is the one that observed creates.
            for port in api_ports:
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as api:
                    metric = stock_to_create_metric((await api.get("/metrics")).text)
                if any(row.get("count") for row in metric.values()):
                    report["service_metric_stock_to_create"] = metric
        place_seconds, place_clients = placing
        if place_seconds:
            bodies = order_mix(2_000, 0, random.Random(20261204))  # none of them ever deploys
            report["placing"] = await place_for(
                [f"http://127.0.0.1:{port}" for port in api_ports],
                pids,
                keys=keys,
                bodies=bodies,
                clients=place_clients,
                seconds=place_seconds,
                rng=rng,
            )
            report["waiting_after_placing"] = (await count_by_status(database_url))["waiting"]
        memory = [proc_status(pid) for pid in pids]
        report["rss_mb_by_replica"] = [round(m["VmRSS"] / 1024, 1) for m in memory]
        report["peak_rss_mb_by_replica"] = [round(m["VmHWM"] / 1024, 1) for m in memory]
        report["rss_mb"] = max(report["rss_mb_by_replica"])
        report["peak_rss_mb"] = max(report["peak_rss_mb_by_replica"])
        report["load_average_after"] = load_average()
    finally:
        for n, process in enumerate(processes):
            if process.poll() is None:
                os.kill(
                    service_pid(process, profiled=profile is not None and n == 0), signal.SIGTERM
                )
        for process in processes:
            process.wait(timeout=60)
    report["orders_by_status_at_end"] = await count_by_status(database_url)
    return report


async def run(
    orders: int,
    rounds: int,
    warmup: int,
    window: float,
    accounts: int,
    profile: Path | None = None,
    postgres: str | None = None,
    replicas: int = 1,
    placing: tuple[float, int] = (0.0, 0),
    placed: int | None = None,
    settle: float = 10.0,
) -> dict[str, Any]:
    rng = random.Random(20261129)
    workdir = Path(tempfile.mkdtemp(prefix="ap-scale-"))
    sim_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROVISION_")}
    sim_process = start(
        [sys.executable, str(Path(__file__).resolve()), "--serve-sim", str(sim_port)],
        env,
        workdir / "sim.log",
    )
    report: dict[str, Any] = {
        "revision": git_revision(),
        "cpus": os.cpu_count(),
        "orders": orders,
        "rounds_per_provider": rounds,
        "warmup_rounds": warmup,
        "window_seconds": window,
        "poll_seconds": PERIODS,
        "database": "postgresql" if postgres else "sqlite",
        "replicas": replicas,
    }
    try:
        await wait_up(sim_ready_url(sim_port), sim_process)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{sim_port}", timeout=30) as http:
            log, sim = LogReader(http), SimControl(http)
            few = order_mix(10, 0, rng)
            few[0]["providers"] = list(PROVIDERS)  # every poller runs, as with 10,000
            async with fresh_database("few", workdir, postgres) as database_url:
                report["few"] = await service_run(
                    label="few",
                    database_url=database_url,
                    orders=few,
                    accounts=min(accounts, 10),
                    workdir=workdir,
                    sim_port=sim_port,
                    sim=sim,
                    log=log,
                    window=window,
                    rounds=0,
                    warmup=0,
                    rng=rng,
                    replicas=replicas,
                )
            many = order_mix(orders, warmup + rounds + 5, rng)
            async with fresh_database("many", workdir, postgres) as database_url:
                report["many"] = await service_run(
                    label="many",
                    database_url=database_url,
                    orders=many,
                    accounts=accounts,
                    workdir=workdir,
                    sim_port=sim_port,
                    sim=sim,
                    log=log,
                    window=window,
                    rounds=rounds,
                    warmup=warmup,
                    rng=rng,
                    profile=profile,
                    replicas=replicas,
                    placing=placing,
                    placed=placed,
                    settle=settle,
                )
    finally:
        sim_process.terminate()
        sim_process.wait(timeout=30)
    report["workdir"] = str(workdir)
    return report


def per_minute(run: dict[str, Any], provider: str, *, type_reads: bool) -> float:
    """A steady window's requests a minute to one provider: those that read one instance
    type's stock (Verda's `/instance-availability/{type}`), or all the others."""
    steady = run["steady"]
    paths: dict[str, int] = steady["providers"][provider]["by_path"]
    sent = sum(n for path, n in paths.items() if ("/instance-availability/" in path) == type_reads)
    return round(sent * 60 / float(steady["seconds"]), 1)


def rss_target(orders: int) -> float:
    """The peak RSS a service process may reach with `orders` waiting."""
    return TARGET_RSS_MB if orders <= 10_000 else TARGET_RSS_MB_100K


def verdicts(report: dict[str, Any]) -> dict[str, bool]:
    """The targets. Requests a minute: the same with 10 and 10,000 orders, except the reads of
    one type's path, of which the budget makes one stream per type the orders watch (more types
    with more orders); Verda as a whole must stay under its project limit."""
    p99 = report["many"]["latency"]["all"]["read_to_create"]["p99_ms"]
    few, many = report["few"], report["many"]
    same = all(
        abs(per_minute(few, p, type_reads=False) - per_minute(many, p, type_reads=False))
        <= max(SAME_RATE_SLACK, SAME_RATE_TOLERANCE * per_minute(few, p, type_reads=False))
        for p in PROVIDERS
    )
    verda = many["steady"]["providers"]["verda"]["per_minute"]
    met = {
        "read_to_create_p99": p99 < TARGET_P99_MS,
        "requests_per_minute_same": same and verda <= VERDA_PROJECT_LIMIT,
        "peak_rss": report["many"]["peak_rss_mb"] < rss_target(report["orders"]),
    }
    placing = report["many"].get("placing")
    if placing is not None:
        post = placing["post"]
        met["placing_rate"] = post["per_second"] >= TARGET_PLACED_PER_SECOND
        met["placing_p99"] = post["p99_ms"] is not None and post["p99_ms"] < TARGET_PLACE_P99_MS
    return met


def print_report(report: dict[str, Any], met: dict[str, bool]) -> None:
    many, few = report["many"], report["few"]
    latency = many["latency"]
    out = sys.stdout
    out.write(f"\n{many['waiting_at_start']} waiting orders at the start of the measured run\n\n")
    out.write("(a) stock read answered -> create request arrives at the provider\n\n")
    out.write(
        "| provider | rounds | median | p90 | p99 | max | later reads | stock -> create median |\n"
    )
    out.write("|---|---|---|---|---|---|---|---|\n")
    for provider in [*PROVIDERS, "all"]:
        row = latency["all"] if provider == "all" else latency["providers"][provider]
        r = row["read_to_create"]
        later = (
            sum(latency["providers"][p]["later_reads_rounds"] for p in PROVIDERS)
            if provider == "all"
            else row["later_reads_rounds"]
        )
        out.write(
            f"| {provider} | {r['samples']} | {r['median_ms']} ms | {r['p90_ms']} ms | "
            f"{r['p99_ms']} ms | {r['max_ms']} ms | {later} | "
            f"{row['stock_to_create']['median_ms']} ms |\n"
        )
    out.write(
        f"\ntarget p99 < {TARGET_P99_MS:.0f} ms: "
        f"{'met' if met['read_to_create_p99'] else 'MISSED'}\n\n"
    )
    out.write("(b) provider requests per minute, steady state\n\n")
    columns = f"| 10 orders | {report['orders']:,} orders |"
    out.write(f"| provider {columns}\n|---|---|---|\n")
    for provider in PROVIDERS:
        out.write(
            f"| {provider} | {few['steady']['providers'][provider]['per_minute']} | "
            f"{many['steady']['providers'][provider]['per_minute']} |\n"
        )
        if per_minute(many, provider, type_reads=True):
            out.write(
                f"| {provider}, one type's path (all types) | "
                f"{per_minute(few, provider, type_reads=True)} | "
                f"{per_minute(many, provider, type_reads=True)} |\n"
            )
    out.write(
        f"| service CPU | {few['steady']['service_cpu_percent']} % | "
        f"{many['steady']['service_cpu_percent']} % |\n"
    )
    out.write(
        f"| machine busy (all cores) | {few['steady']['machine_busy_percent']} % | "
        f"{many['steady']['machine_busy_percent']} % |\n"
    )
    out.write(
        f"\nthe same but for one type's paths, Verda under {VERDA_PROJECT_LIMIT} a minute: "
        f"{'yes' if met['requests_per_minute_same'] else 'NO'}\n\n"
    )
    out.write(f"(c) service memory\n\n| {columns}\n|---|---|---|\n")
    out.write(f"| peak RSS (VmHWM) | {few['peak_rss_mb']} MB | {many['peak_rss_mb']} MB |\n")
    target = rss_target(report["orders"])
    out.write(f"\ntarget < {target:.0f} MB: {'met' if met['peak_rss'] else 'MISSED'}\n")
    by_replica = ", ".join(f"{mb} MB" for mb in many["peak_rss_mb_by_replica"])
    out.write(f"peak RSS per replica with {report['orders']:,} orders: {by_replica}\n")
    placing = many.get("placing")
    if placing is not None:
        post = placing["post"]
        out.write(
            f"\n(d) placing orders: {placing['clients']} clients over {placing['replicas']} "
            f"replicas for {placing['seconds']} s\n\n"
            f"{post['per_second']} orders/s (target >= {TARGET_PLACED_PER_SECOND:.0f}: "
            f"{'met' if met['placing_rate'] else 'MISSED'}), p50 {post['p50_ms']} ms, "
            f"p99 {post['p99_ms']} ms (target < {TARGET_PLACE_P99_MS:.0f}: "
            f"{'met' if met['placing_p99'] else 'MISSED'}), {post['shed_503']} 503s, "
            f"errors {post['errors']}; service CPU {placing['service_cpu_percent']} % "
            f"(all replicas), machine busy {placing['machine_busy_percent']} %\n"
        )
    out.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--orders", type=int, default=10_000, help="orders that keep waiting")
    parser.add_argument("--rounds", type=int, default=120, help="stock appearances per provider")
    parser.add_argument("--warmup", type=int, default=2, help="uncounted rounds per provider")
    parser.add_argument("--window", type=float, default=60.0, help="seconds to count requests")
    parser.add_argument("--accounts", type=int, default=200, help="accounts the orders belong to")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--profile",
        type=Path,
        help="run the many-orders service under py-spy and write its raw samples here "
        "(slows the service: not for the figures)",
    )
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="run on PostgreSQL: a server's URL (postgresql+asyncpg://user@host:port/db); each "
        "run makes a database of its own there and drops it after",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="service processes on the one database (more than one needs --postgres); the "
        "lease holder watches, every replica's RSS is reported",
    )
    parser.add_argument(
        "--place-seconds",
        type=float,
        default=0.0,
        help="after the rounds, place orders across the replicas for this long (none by default)",
    )
    parser.add_argument("--place-clients", type=int, default=64, help="clients that place orders")
    parser.add_argument(
        "--placed",
        type=int,
        help="place only this many orders one by one (place_order); the rest are copies of "
        "them made in SQL (default: all placed one by one)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=10.0,
        help="seconds between the many-orders service answering and the first measurement "
        "(after a start it tells every order near a price why it waits: minutes with 100,000)",
    )
    parser.add_argument("--serve-sim", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replicas > 1 and not args.postgres:
        parser.error("--replicas above 1 needs --postgres (an SQLite file serves one process)")
    sys.path.insert(0, str(ROOT))  # the app next to this script, not another checkout's
    if args.serve_sim:
        serve_sim(args.serve_sim)
        return 0
    report = asyncio.run(
        run(
            args.orders,
            args.rounds,
            args.warmup,
            args.window,
            args.accounts,
            args.profile,
            args.postgres,
            args.replicas,
            (args.place_seconds, args.place_clients),
            args.placed,
            args.settle,
        )
    )
    met = verdicts(report)
    report["met"] = met
    print_report(report, met)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
