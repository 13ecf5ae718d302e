"""How much API load does one service process take? POST /v1/orders and GET /v1/orders/{id}.

Starts the service API-only (`autoprovision serve` with AUTOPROVISION_WATCHER=false: no pollers,
no simulators) as its own process, once on a fresh SQLite file and once on a fresh PostgreSQL
database (created for the run on the server of --postgres-url and dropped afterwards), makes
ACCOUNTS funded accounts through the admin API, and then, per database:

  post   CLIENTS concurrent clients place orders back to back for SECONDS, each request with
         its own Idempotency-Key (as the README recommends) and for one of the accounts.
         Figures: orders placed per second (201 answers / wall time), request p50 and p99.
  get    CLIENTS concurrent clients read orders placed in `post` (random id, with the key of
         the account that owns it) for SECONDS. Figures: requests per second, p50 and p99.
  wrk    the same reads from `wrk` (C, one thread, CLIENTS connections), in case the Python
         client is what saturates first. Figures from wrk's own --latency output.
  mixed  CLIENTS/2 clients place orders while CLIENTS/2 read, for SECONDS: GET p50/p99 while
         the database takes writes, and the POST rate at the same time.

Then issue 11's load phases, SECONDS each:

  post_few      FEW (10) clients place orders: the SQLite write path without a crowd.
  get_base      BASE (50) clients read orders; the reference throughput.
  get_many      MANY (200) clients read orders: throughput (and its ratio to get_base), p99,
                503s and connection errors.
  wrk_get_base, wrk_get_many  the same reads from wrk, which does not back off after a 503.
  post_many     MANY clients place orders.

The Python clients behave as the README asks clients to: after a 503 they wait as its
`Retry-After` says. 2xx answers count for throughput and latency; 503s are counted apart (with
how fast they came), other statuses and transport failures as errors. Each client has its own
connection (its own httpx client): one httpx pool of 200 connections costs more CPU per request
than the service does, and the figures would be the generator's.

Every Python figure is measured by this script's client (httpx on asyncio, one process, time
from just before the request is sent to the whole response read). Next to each phase it reports
the CPU the service process and the load generator used (per cent of one core; the machine's
core count is in the output): a generator near 100 % is the bottleneck, not the service. The
service is one uvicorn process, so it can use at most one core; PostgreSQL runs on the same
machine and its CPU is not counted in either figure.

Targets: at least TARGET orders per second on both databases (default 200: "hundreds"); on
SQLite, POST p99 <= 300 ms at FEW clients; on PostgreSQL at MANY clients, GET p99 <= 1 s, no
connection errors and at least 80 % of the BASE throughput. Exits non-zero on a missed target
or on any answer that is neither 2xx nor 503.

    .venv/bin/python bench/api_load.py [--seconds 20] [--clients 32] [--few 10] [--base 50] \\
        [--many 200] [--phases post,get_many,...] [--no-sqlite | --no-postgres] \\
        [--postgres-url postgresql+asyncpg://postgres@127.0.0.1:5432/test] \\
        [--json bench/results/api_load.json]
"""

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import resource
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from common import (
    ROOT,
    busy_percent,
    cpu_seconds,
    free_port,
    git_revision,
    load_average,
    machine_cpu,
    pg_admin,
    wait_up,
)

ADMIN_KEY = "bench-admin-key-0123456789"
DEFAULT_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
MACHINES = [
    ("H100", 8, ["verda", "hyperstack", "quantacloud"], "25.00"),
    ("H100", 1, ["verda", "quantacloud"], "3.00"),
    ("B200", 8, ["verda", "quantacloud"], "40.00"),
    ("A100-80G", 8, ["hyperstack"], "12.00"),
    ("L40S", 1, ["quantacloud"], "1.10"),
    ("RTX-A6000", 1, ["verda", "hyperstack"], "0.80"),
]
ONE_CONNECTION = httpx.Limits(max_connections=1, max_keepalive_connections=1)
TLS = ssl.create_default_context()  # never used (the service is plain http); httpx wants one
PHASES = (
    "post",
    "get",
    "wrk_get",
    "mixed",
    "post_few",
    "get_base",
    "get_many",
    "wrk_get_base",
    "wrk_get_many",
    "post_many",
)
WRK_SCRIPT = """
local pairs = {}
for line in io.lines("%s") do
  local key, id = line:match("(%%S+) (%%S+)")
  pairs[#pairs + 1] = {key, id}
end
math.randomseed(os.time())
request = function()
  local pair = pairs[math.random(#pairs)]
  return wrk.format("GET", "/v1/orders/" .. pair[2], {["Authorization"] = "Bearer " .. pair[1]})
end
local threads = {}
function setup(thread) threads[#threads + 1] = thread end
shed = 0
function response(status, headers, body) if status == 503 then shed = shed + 1 end end
function done(summary, latency, requests)
  local total = 0
  for _, thread in ipairs(threads) do total = total + thread:get("shed") end
  io.write(string.format("503 answers: %%d\\n", total))
end
"""


def order_body(rng: random.Random, n: int) -> dict[str, Any]:
    model, count, providers, price = rng.choice(MACHINES)
    body: dict[str, Any] = {
        "gpu_model": model,
        "gpu_count": count,
        "providers": providers,
        "max_price_per_hour": price,
        "name": f"load {n}",
    }
    if rng.random() < 0.3:
        body["min_disk_gb"] = 500
    return body


# --- processes and databases ---------------------------------------------------------------------


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def with_database(url: str, database: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(database=database).render_as_string(hide_password=False)


# --- load ----------------------------------------------------------------------------------------


class Tally:
    """Latencies and statuses of one kind of request in one phase."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.shed: list[float] = []  # how long each 503 took to arrive
        self.errors: dict[str, int] = {}

    def add(self, seconds: float, status: int | str) -> None:
        if isinstance(status, int) and 200 <= status < 300:
            self.latencies.append(seconds)
            return
        if status == 503:
            self.shed.append(seconds)
        self.errors[str(status)] = self.errors.get(str(status), 0) + 1

    def summary(self, elapsed: float) -> dict[str, Any]:
        ok = self.latencies
        quantiles = statistics.quantiles(ok, n=100, method="inclusive") if len(ok) > 1 else []
        return {
            "ok": len(ok),
            "errors": self.errors,
            "connection_errors": sum(n for k, n in self.errors.items() if not k.isdigit()),
            "shed_503": len(self.shed),
            "shed_p50_ms": round(statistics.median(self.shed) * 1000, 2) if self.shed else None,
            "per_second": round(len(ok) / elapsed, 1),
            "p50_ms": round(statistics.median(ok) * 1000, 2) if ok else None,
            "p90_ms": round(quantiles[89] * 1000, 2) if quantiles else None,
            "p99_ms": round(quantiles[98] * 1000, 2) if quantiles else None,
            "max_ms": round(max(ok) * 1000, 2) if ok else None,
        }


async def back_off(response: httpx.Response | None, until: float) -> None:
    """After a 503, wait as its Retry-After asks (as a well-behaved client does), up to `until`."""
    if response is None or response.status_code != 503:
        return
    retry_after = response.headers.get("Retry-After", "1")
    delay = float(retry_after) if retry_after.isdigit() else 1.0
    await asyncio.sleep(max(0.0, min(delay, until - time.monotonic())))


async def poster(
    api: httpx.AsyncClient,
    keys: list[str],
    until: float,
    tally: Tally,
    placed: list[tuple[str, str]],
    rng: random.Random,
    body_of: Callable[[random.Random, int], dict[str, Any]] = order_body,
) -> None:
    """Place orders back to back until `until` (the `n`th body from `body_of`), backing off
    after a 503 as its Retry-After says."""
    n = 0
    while time.monotonic() < until:
        key = rng.choice(keys)
        headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": str(uuid.uuid4())}
        body = body_of(rng, n)
        n += 1
        began = time.perf_counter()
        response: httpx.Response | None = None
        try:
            response = await api.post("/v1/orders", json=body, headers=headers)
            status: int | str = response.status_code
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        tally.add(time.perf_counter() - began, status)
        if response is not None and status == 201:
            placed.append((key, response.json()["id"]))
        await back_off(response, until)


async def getter(
    api: httpx.AsyncClient,
    placed: list[tuple[str, str]],
    until: float,
    tally: Tally,
    rng: random.Random,
) -> None:
    while time.monotonic() < until:
        key, order_id = rng.choice(placed)
        began = time.perf_counter()
        response: httpx.Response | None = None
        try:
            response = await api.get(
                f"/v1/orders/{order_id}", headers={"Authorization": f"Bearer {key}"}
            )
            status: int | str = response.status_code
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        tally.add(time.perf_counter() - began, status)
        await back_off(response, until)


async def phase(
    url: str,
    pid: int,
    *,
    posters: int,
    getters: int,
    seconds: float,
    keys: list[str],
    placed: list[tuple[str, str]],
    rng: random.Random,
) -> dict[str, Any]:
    """Run `posters` + `getters` clients for `seconds`; their figures and the CPU used."""
    posts, gets = Tally(), Tally()
    async with contextlib.AsyncExitStack() as stack:
        # One connection per client, each in its own httpx client: one pool of 200 connections
        # costs httpx more CPU per request than the service spends answering it. Made before
        # the clock starts, with one TLS context between them (each would cost some 50 ms of CPU).
        apis = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=url, timeout=60, limits=ONE_CONNECTION, verify=TLS)
            )
            for _ in range(posters + getters)
        ]
        until = time.monotonic() + seconds
        service_before, own_before = cpu_seconds(pid), own_cpu_seconds()
        machine_before = machine_cpu()
        began = time.monotonic()
        await asyncio.gather(
            *(poster(api, keys, until, posts, placed, rng) for api in apis[:posters]),
            *(getter(api, placed, until, gets, rng) for api in apis[posters:]),
        )
        elapsed = time.monotonic() - began
        service_after, own_after = cpu_seconds(pid), own_cpu_seconds()
        machine = busy_percent(machine_before)
    report: dict[str, Any] = {
        "seconds": round(elapsed, 1),
        "clients": {"post": posters, "get": getters},
        "service_cpu_percent": round(100 * (service_after - service_before) / elapsed, 1),
        "client_cpu_percent": round(100 * (own_after - own_before) / elapsed, 1),
        "machine_busy_percent": machine,
        "tool": "httpx",
    }
    if posters:
        report["post"] = posts.summary(elapsed)
    if getters:
        report["get"] = gets.summary(elapsed)
    return report


def wrk_duration(text: str) -> float:
    """A wrk duration ("812.00us", "1.23ms", "2.01s") in milliseconds."""
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if match is None:
        raise ValueError(f"cannot read wrk duration {text!r}")
    value, unit = float(match.group(1)), match.group(2)
    return value * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}[unit]


def wrk_seconds(text: str) -> float:
    """A wrk duration ("6.03s", "812.00ms") in seconds."""
    return wrk_duration(text) / 1000


def run_wrk(
    url: str, placed: list[tuple[str, str]], clients: int, seconds: float, workdir: Path, pid: int
) -> dict[str, Any]:
    """GET /v1/orders/{id} from wrk: its throughput and latency percentiles."""
    wrk = shutil.which("wrk")
    if wrk is None:
        return {"skipped": "wrk is not installed (apt-get install -y wrk)"}
    pairs = workdir / "orders.txt"
    pairs.write_text("".join(f"{key} {order_id}\n" for key, order_id in placed))
    script = workdir / "get.lua"
    script.write_text(WRK_SCRIPT % pairs)
    service_before, children_before = cpu_seconds(pid), children_cpu_seconds()
    machine_before = machine_cpu()
    began = time.monotonic()
    command = [wrk, "-t1", f"-c{clients}", f"-d{int(seconds)}s", "--timeout", "30s"]
    output = subprocess.run(
        [*command, "--latency", "-s", str(script), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    elapsed = time.monotonic() - began
    report: dict[str, Any] = {
        "seconds": round(elapsed, 1),
        "clients": {"post": 0, "get": clients},
        "service_cpu_percent": round(100 * (cpu_seconds(pid) - service_before) / elapsed, 1),
        "client_cpu_percent": round(100 * (children_cpu_seconds() - children_before) / elapsed, 1),
        "machine_busy_percent": busy_percent(machine_before),
        "tool": "wrk",
        "output": output,
    }
    percentiles = dict(re.findall(r"^\s+(50|90|99)%\s+(\S+)\s*$", output, re.MULTILINE))
    latency = re.search(r"^\s+Latency\s+\S+\s+\S+\s+(\S+)", output, re.MULTILINE)
    rate = re.search(r"Requests/sec:\s+([\d.]+)", output)
    total = re.search(r"(\d+) requests in ([\d.]+\w+),", output)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors = re.search(r"Socket errors: (.*)", output)
    shed = re.search(r"503 answers: (\d+)", output)
    socket = dict(
        re.findall(r"(connect|read|write|timeout) (\d+)", errors.group(1) if errors else "")
    )
    # wrk's rate and percentiles count every answer, 503s too; the rate here is of 2xx only.
    non_2xx = int(bad.group(1)) if bad else 0
    shed_503 = int(shed.group(1)) if shed else 0
    ok = int(total.group(1)) - non_2xx if total else None
    errors_by_status = {"503": shed_503, "other_non_2xx": non_2xx - shed_503}
    report["get"] = {
        "ok": ok,
        "errors": {k: n for k, n in errors_by_status.items() if n},
        "socket_errors": errors.group(1) if errors else None,
        "connection_errors": sum(int(socket.get(k, 0)) for k in ("connect", "read", "write")),
        "per_second": round(ok / wrk_seconds(total.group(2)), 1)
        if ok is not None and total
        else None,
        "all_answers_per_second": float(rate.group(1)) if rate else None,
        "p50_ms": round(wrk_duration(percentiles["50"]), 2) if "50" in percentiles else None,
        "p90_ms": round(wrk_duration(percentiles["90"]), 2) if "90" in percentiles else None,
        "p99_ms": round(wrk_duration(percentiles["99"]), 2) if "99" in percentiles else None,
        "max_ms": round(wrk_duration(latency.group(1)), 2) if latency else None,
        "shed_503": shed_503,
    }
    return report


async def one_database(
    label: str,
    database_url: str,
    *,
    clients: int,
    seconds: float,
    accounts: int,
    workdir: Path,
    shape: "Shape",
    profile: Path | None = None,
) -> dict[str, Any]:
    """Start the API-only service on `database_url` and run every phase against it."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROVISION_")}
    env.update(
        {
            "AUTOPROVISION_DATABASE_URL": database_url,
            "AUTOPROVISION_ADMIN_API_KEY": ADMIN_KEY,
            "AUTOPROVISION_WATCHER": "false",
            "AUTOPROVISION_PORT": str(port),
            "AUTOPROVISION_LOG_LEVEL": "warning",
            "AUTOPROVISION_MAX_WAITING_ORDERS_PER_ACCOUNT": "100000",
            "AUTOPROVISION_MAX_PLACEMENTS_PER_HOUR": "1000000",
            "PYTHONPATH": str(ROOT),
            **shape.service_env,
        }
    )
    log = workdir / f"service-{label}.log"
    command = [sys.executable, "-m", "app", "serve"]
    if profile is not None:  # py-spy starts the service and samples it (it may slow it a bit)
        profile.mkdir(parents=True, exist_ok=True)
        spy = [str(Path(sys.executable).parent / "py-spy"), "record", "-r", "100"]
        command = [
            *spy,
            "-f",
            "raw",
            "-o",
            str((profile / f"{label}.txt").resolve()),
            "--",
            *command,
        ]
    process = subprocess.Popen(
        command,
        cwd=workdir,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    rng = random.Random(label)
    report: dict[str, Any] = {"load_average_before": load_average()}
    try:
        url = f"http://127.0.0.1:{port}"
        await wait_up(f"{url}/healthz", process)
        pid = process.pid
        if profile is not None:  # the service is py-spy's one child
            pid = int(Path(f"/proc/{pid}/task/{pid}/children").read_text().split()[0])
        async with httpx.AsyncClient(base_url=url, timeout=60) as api:
            admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
            keys = []
            for n in range(accounts):
                made = await api.post("/v1/accounts", json={"name": f"load {n}"}, headers=admin)
                made.raise_for_status()
                account = made.json()
                credit = {"amount": "1000"}
                path = f"/v1/accounts/{account['id']}/credits"
                (await api.post(path, json=credit, headers=admin)).raise_for_status()
                keys.append(account["api_key"])
        placed: list[tuple[str, str]] = []

        async def wrk(connections: int) -> dict[str, Any]:
            return run_wrk(url, placed, connections, seconds, workdir, pid)

        async def load(posters: int, getters: int, length: float) -> dict[str, Any]:
            return await phase(
                url,
                pid,
                posters=posters,
                getters=getters,
                seconds=length,
                keys=keys,
                placed=placed,
                rng=rng,
            )

        await load(clients, 0, 2)  # warm-up, not counted: connections, first of everything
        phases: dict[str, Callable[[], Awaitable[dict[str, Any]]]] = {
            "post": lambda: load(clients, 0, seconds),
            "get": lambda: load(0, clients, seconds),
            "wrk_get": lambda: wrk(clients),
            "mixed": lambda: load(max(clients // 2, 1), max(clients // 2, 1), seconds),
            # issue 11's load targets: few writers; reads at `base` and at `many` connections
            "post_few": lambda: load(shape.few, 0, seconds),
            "get_base": lambda: load(0, shape.base, seconds),
            "get_many": lambda: load(0, shape.many, seconds),
            "wrk_get_base": lambda: wrk(shape.base),
            "wrk_get_many": lambda: wrk(shape.many),
            "post_many": lambda: load(shape.many, 0, seconds),
        }
        for name, run_phase in phases.items():
            if name in shape.phases:
                report[name] = await run_phase()
        report["orders_placed"] = len(placed)
    finally:
        if process.poll() is None:
            os.kill(pid if profile is not None else process.pid, signal.SIGTERM)
        process.wait(timeout=60)
    report["load_average_after"] = load_average()
    return report


@dataclass(frozen=True)
class Shape:
    """Client counts of issue 11's phases, and which phases to run."""

    few: int = 10
    base: int = 50
    many: int = 200
    phases: frozenset[str] = frozenset(PHASES)
    service_env: dict[str, str] = field(default_factory=dict)


async def run(
    *,
    clients: int,
    seconds: float,
    accounts: int,
    sqlite: bool,
    postgres_url: str | None,
    shape: Shape,
    profile: Path | None = None,
) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="ap-load-"))
    report: dict[str, Any] = {
        "revision": git_revision(),
        "cpus": os.cpu_count(),
        "clients": clients,
        "clients_few_base_many": [shape.few, shape.base, shape.many],
        "service_env": shape.service_env,
        "seconds_per_phase": seconds,
        "accounts": accounts,
        "databases": {},
    }

    async def one(label: str, database_url: str) -> dict[str, Any]:
        return await one_database(
            label,
            database_url,
            clients=clients,
            seconds=seconds,
            accounts=accounts,
            workdir=workdir,
            shape=shape,
            profile=profile,
        )

    if sqlite:
        report["databases"]["sqlite"] = await one(
            "sqlite", f"sqlite+aiosqlite:///{workdir / 'load.db'}"
        )
    if postgres_url is not None:
        name = f"ap_bench_{uuid.uuid4().hex[:12]}"
        await pg_admin(postgres_url, f'CREATE DATABASE "{name}"')
        try:
            report["databases"]["postgresql"] = await one(
                "postgresql", with_database(postgres_url, name)
            )
        finally:
            await pg_admin(postgres_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    report["workdir"] = str(workdir)
    return report


def cell(row: dict[str, Any] | None, *keys: str, unit: str = "") -> str:
    if row is None:
        return "-"
    values = [row.get(k) for k in keys]
    if any(v is None for v in values):
        return "-"
    return " / ".join(f"{v}" for v in values) + unit


def ratio(row: dict[str, Any], many: str, base: str) -> float | None:
    """Throughput at many connections over throughput at base connections."""
    try:
        share = float(row[many]["get"]["per_second"]) / float(row[base]["get"]["per_second"])
    except (KeyError, TypeError, ZeroDivisionError):
        return None
    return round(share, 2)


def print_report(report: dict[str, Any], target: float) -> None:
    databases = report["databases"]
    names = list(databases)
    few, base, many = report["clients_few_base_many"]
    clients = report["clients"]
    out = sys.stdout
    out.write(
        f"\n{clients} clients ({few} / {base} / {many} in the load phases), "
        f"{report['seconds_per_phase']:.0f} s per phase, {report['cpus']} CPUs\n\n"
    )
    out.write(f"| measure | tool | {' | '.join(names)} |\n|---|---|{'---|' * len(names)}\n")
    rows: list[tuple[str, str, str, tuple[str, ...], str]] = [
        (f"POST throughput, {clients} clients", "httpx", "post", ("post", "per_second"), " /s"),
        ("POST p50 / p99", "httpx", "post", ("post", "p50_ms", "p99_ms"), " ms"),
        (f"GET throughput, {clients} clients", "httpx", "get", ("get", "per_second"), " /s"),
        ("GET p50 / p99", "httpx", "get", ("get", "p50_ms", "p99_ms"), " ms"),
        (f"GET throughput, {clients} clients", "wrk", "wrk_get", ("get", "per_second"), " /s"),
        ("GET p50 / p99", "wrk", "wrk_get", ("get", "p50_ms", "p99_ms"), " ms"),
        ("mixed: POST throughput", "httpx", "mixed", ("post", "per_second"), " /s"),
        ("mixed: GET p50 / p99", "httpx", "mixed", ("get", "p50_ms", "p99_ms"), " ms"),
    ]
    for label, phase_name, part in (
        (f"POST, {few} clients", "post_few", "post"),
        (f"GET, {base} clients", "get_base", "get"),
        (f"GET, {many} clients", "get_many", "get"),
        (f"GET, {base} connections", "wrk_get_base", "get"),
        (f"GET, {many} connections", "wrk_get_many", "get"),
        (f"POST, {many} clients", "post_many", "post"),
    ):
        tool = "wrk" if phase_name.startswith("wrk") else "httpx"
        rows += [
            (f"{label}: throughput", tool, phase_name, (part, "per_second"), " /s"),
            (
                f"{label}: p50 / p99 / max",
                tool,
                phase_name,
                (part, "p50_ms", "p99_ms", "max_ms"),
                " ms",
            ),
            (
                f"{label}: 503 / connection errors",
                tool,
                phase_name,
                (part, "shed_503", "connection_errors"),
                "",
            ),
        ]
    for title, tool, phase_name, (part, *fields), unit in rows:
        if not any(phase_name in databases[n] for n in names):
            continue
        cells = [
            cell(databases[n].get(phase_name, {}).get(part), *fields, unit=unit) for n in names
        ]
        out.write(f"| {title} | {tool} | {' | '.join(cells)} |\n")
    for tool, many_phase, base_phase in (
        ("httpx", "get_many", "get_base"),
        ("wrk", "wrk_get_many", "wrk_get_base"),
    ):
        cells = [str(ratio(databases[n], many_phase, base_phase) or "-") for n in names]
        out.write(f"| GET throughput {many} / {base} | {tool} | {' | '.join(cells)} |\n")
    for phase_name in PHASES:
        if not any(phase_name in databases[n] for n in names):
            continue
        cells = [
            f"{databases[n][phase_name].get('service_cpu_percent', '-')} % / "
            f"{databases[n][phase_name].get('client_cpu_percent', '-')} % / "
            f"{databases[n][phase_name].get('machine_busy_percent', '-')} %"
            if phase_name in databases[n]
            else "-"
            for n in names
        ]
        tool = "wrk" if phase_name.startswith("wrk") else "httpx"
        out.write(
            f"| CPU: service / generator / machine ({phase_name}) | {tool} | "
            f"{' | '.join(cells)} |\n"
        )
    out.write(f"\ntargets: >= {target:.0f} orders/s on every database; then issue 11's:\n")
    for name, met in report["targets"].items():
        out.write(f"  {'met   ' if met else 'MISSED'} {name}\n")
    out.flush()


def targets(report: dict[str, Any], target: float) -> dict[str, bool]:
    """Each target this run measured, and whether it was met."""
    few, base, many = report["clients_few_base_many"]
    results: dict[str, bool] = {}
    for db, row in report["databases"].items():
        if "post" in row:
            results[f"{db}: POST >= {target:.0f} orders/s"] = (
                row["post"]["post"]["per_second"] >= target
            )
        failed = sum(
            n
            for phase_name in PHASES
            for part in ("post", "get")
            for status, n in row.get(phase_name, {}).get(part, {}).get("errors", {}).items()
            if status != "503"
        )
        results[f"{db}: no answers but 2xx and 503, no connection errors"] = failed == 0
    sqlite = report["databases"].get("sqlite", {})
    if "post_few" in sqlite:
        p99 = sqlite["post_few"]["post"]["p99_ms"]
        results[f"sqlite: POST p99 <= 300 ms at {few} clients"] = p99 is not None and p99 <= 300
    postgres = report["databases"].get("postgresql", {})
    if "get_many" in postgres:
        get = postgres["get_many"]["get"]
        results[f"postgresql: GET p99 <= 1 s at {many} clients"] = (
            get["p99_ms"] is not None and get["p99_ms"] <= 1000
        )
        results[f"postgresql: no connection errors at {many} clients"] = (
            get["connection_errors"] == 0
        )
    if "get_base" in postgres and "get_many" in postgres:
        share = ratio(postgres, "get_many", "get_base")
        results[f"postgresql: GET throughput at {many} >= 80 % of {base}"] = (
            share is not None and share >= 0.8
        )
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients")
    parser.add_argument("--accounts", type=int, default=32, help="accounts the orders belong to")
    parser.add_argument("--few", type=int, default=10, help="POST clients of post_few")
    parser.add_argument("--base", type=int, default=50, help="GET clients of the *_base phases")
    parser.add_argument("--many", type=int, default=200, help="clients of the *_many phases")
    parser.add_argument(
        "--phases",
        default=",".join(PHASES),
        help="comma-separated subset of: " + ", ".join(PHASES) + " (GETs need a POST phase first)",
    )
    parser.add_argument(
        "--service-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the service, e.g. AUTOPROVISION_DB_POOL_SIZE=5 (repeatable)",
    )
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument("--target", type=float, default=200.0, help="orders per second")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="run the service under py-spy, raw samples in DIR/<database>.txt "
        "(slows the service: not for the figures)",
    )
    args = parser.parse_args()
    chosen = frozenset(p.strip() for p in args.phases.split(",") if p.strip())
    if chosen - set(PHASES):
        parser.error(f"unknown phases: {', '.join(sorted(chosen - set(PHASES)))}")
    sys.path.insert(0, str(ROOT))  # the app next to this script, not another checkout's
    report = asyncio.run(
        run(
            clients=args.clients,
            seconds=args.seconds,
            accounts=args.accounts,
            sqlite=not args.no_sqlite,
            postgres_url=None if args.no_postgres else args.postgres_url,
            shape=Shape(
                few=args.few,
                base=args.base,
                many=args.many,
                phases=chosen,
                service_env=dict(item.split("=", 1) for item in args.service_env),
            ),
            profile=args.profile,
        )
    )
    report["target_orders_per_second"] = args.target
    report["targets"] = targets(report, args.target)
    report["met"] = all(report["targets"].values())
    print_report(report, args.target)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if report["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
