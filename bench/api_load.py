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

Every Python figure is measured by this script's client (httpx on asyncio, one process, time
from just before the request is sent to the whole response read). Next to each phase it reports
the CPU the service process and the load generator used (per cent of one core; the machine's
core count is in the output): a generator near 100 % is the bottleneck, not the service. The
service is one uvicorn process, so it can use at most one core; PostgreSQL runs on the same
machine and its CPU is not counted in either figure.

Target: at least TARGET orders per second on both databases (default 200: "hundreds"). GET
latency has no fixed target; it is reported. Exits non-zero on a missed target or on any
answer that is not 2xx.

    .venv/bin/python bench/api_load.py [--seconds 20] [--clients 32] \\
        [--postgres-url postgresql+asyncpg://postgres@127.0.0.1:5432/test] [--no-postgres] \\
        [--json bench/results/api_load.json]
"""

import argparse
import asyncio
import json
import os
import random
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
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


async def pg_admin(url: str, sql: str) -> None:
    import asyncpg
    from sqlalchemy.engine import make_url

    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


def with_database(url: str, database: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(database=database).render_as_string(hide_password=False)


# --- load ----------------------------------------------------------------------------------------


class Tally:
    """Latencies and statuses of one kind of request in one phase."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors: dict[str, int] = {}

    def add(self, seconds: float, status: int | str) -> None:
        if isinstance(status, int) and 200 <= status < 300:
            self.latencies.append(seconds)
        else:
            self.errors[str(status)] = self.errors.get(str(status), 0) + 1

    def summary(self, elapsed: float) -> dict[str, Any]:
        ok = self.latencies
        quantiles = statistics.quantiles(ok, n=100, method="inclusive") if len(ok) > 1 else []
        return {
            "ok": len(ok),
            "errors": self.errors,
            "per_second": round(len(ok) / elapsed, 1),
            "p50_ms": round(statistics.median(ok) * 1000, 2) if ok else None,
            "p90_ms": round(quantiles[89] * 1000, 2) if quantiles else None,
            "p99_ms": round(quantiles[98] * 1000, 2) if quantiles else None,
            "max_ms": round(max(ok) * 1000, 2) if ok else None,
        }


async def poster(
    api: httpx.AsyncClient,
    keys: list[str],
    until: float,
    tally: Tally,
    placed: list[tuple[str, str]],
    rng: random.Random,
) -> None:
    n = 0
    while time.monotonic() < until:
        key = rng.choice(keys)
        headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": str(uuid.uuid4())}
        body = order_body(rng, n)
        n += 1
        began = time.perf_counter()
        try:
            response = await api.post("/v1/orders", json=body, headers=headers)
            status: int | str = response.status_code
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        tally.add(time.perf_counter() - began, status)
        if status == 201:
            placed.append((key, response.json()["id"]))


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
        try:
            response = await api.get(
                f"/v1/orders/{order_id}", headers={"Authorization": f"Bearer {key}"}
            )
            status: int | str = response.status_code
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        tally.add(time.perf_counter() - began, status)


async def phase(
    api: httpx.AsyncClient,
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
    until = time.monotonic() + seconds
    service_before, own_before, machine_before = cpu_seconds(pid), own_cpu_seconds(), machine_cpu()
    began = time.monotonic()
    await asyncio.gather(
        *(poster(api, keys, until, posts, placed, rng) for _ in range(posters)),
        *(getter(api, placed, until, gets, rng) for _ in range(getters)),
    )
    elapsed = time.monotonic() - began
    report: dict[str, Any] = {
        "seconds": round(elapsed, 1),
        "clients": {"post": posters, "get": getters},
        "service_cpu_percent": round(100 * (cpu_seconds(pid) - service_before) / elapsed, 1),
        "client_cpu_percent": round(100 * (own_cpu_seconds() - own_before) / elapsed, 1),
        "machine_busy_percent": busy_percent(machine_before),
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
    output = subprocess.run(
        [wrk, "-t1", f"-c{clients}", f"-d{int(seconds)}s", "--latency", "-s", str(script), url],
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
    percentiles = dict(re.findall(r"^\s+(50|90|99)%\s+(\S+)$", output, re.MULTILINE))
    rate = re.search(r"Requests/sec:\s+([\d.]+)", output)
    total = re.search(r"(\d+) requests in", output)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors = re.search(r"Socket errors: (.*)", output)
    report["get"] = {
        "ok": int(total.group(1)) - (int(bad.group(1)) if bad else 0) if total else None,
        "errors": {"non_2xx": int(bad.group(1))} if bad else {},
        "socket_errors": errors.group(1) if errors else None,
        "per_second": float(rate.group(1)) if rate else None,
        "p50_ms": round(wrk_duration(percentiles["50"]), 2) if "50" in percentiles else None,
        "p90_ms": round(wrk_duration(percentiles["90"]), 2) if "90" in percentiles else None,
        "p99_ms": round(wrk_duration(percentiles["99"]), 2) if "99" in percentiles else None,
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
            "PYTHONPATH": str(ROOT),
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
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as api:
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

            async def load(posters: int, getters: int, length: float) -> dict[str, Any]:
                return await phase(
                    api,
                    pid,
                    posters=posters,
                    getters=getters,
                    seconds=length,
                    keys=keys,
                    placed=placed,
                    rng=rng,
                )

            await load(clients, 0, 2)  # warm-up, not counted: connections, first of everything
            report["post"] = await load(clients, 0, seconds)
            report["get"] = await load(0, clients, seconds)
            report["wrk_get"] = run_wrk(url, placed, clients, seconds, workdir, pid)
            half = max(clients // 2, 1)
            report["mixed"] = await load(half, half, seconds)
            report["orders_placed"] = len(placed)
    finally:
        if process.poll() is None:
            os.kill(pid if profile is not None else process.pid, signal.SIGTERM)
        process.wait(timeout=60)
    report["load_average_after"] = load_average()
    return report


async def run(
    *,
    clients: int,
    seconds: float,
    accounts: int,
    postgres_url: str | None,
    profile: Path | None = None,
) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="ap-load-"))
    report: dict[str, Any] = {
        "revision": git_revision(),
        "cpus": os.cpu_count(),
        "clients": clients,
        "seconds_per_phase": seconds,
        "accounts": accounts,
        "databases": {},
    }
    sqlite_url = f"sqlite+aiosqlite:///{workdir / 'load.db'}"
    report["databases"]["sqlite"] = await one_database(
        "sqlite",
        sqlite_url,
        clients=clients,
        seconds=seconds,
        accounts=accounts,
        workdir=workdir,
        profile=profile,
    )
    if postgres_url is not None:
        name = f"ap_bench_{uuid.uuid4().hex[:12]}"
        await pg_admin(postgres_url, f'CREATE DATABASE "{name}"')
        try:
            report["databases"]["postgresql"] = await one_database(
                "postgresql",
                with_database(postgres_url, name),
                clients=clients,
                seconds=seconds,
                accounts=accounts,
                workdir=workdir,
                profile=profile,
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


def print_report(report: dict[str, Any], target: float) -> None:
    databases = report["databases"]
    names = list(databases)
    out = sys.stdout
    out.write(
        f"\n{report['clients']} clients, {report['seconds_per_phase']:.0f} s per phase, "
        f"{report['cpus']} CPUs\n\n"
    )
    out.write(f"| measure | tool | {' | '.join(names)} |\n|---|---|{'---|' * len(names)}\n")
    rows: list[tuple[str, str, str, tuple[str, ...], str]] = [
        ("POST /v1/orders throughput", "httpx", "post", ("post", "per_second"), " orders/s"),
        ("POST p50 / p99", "httpx", "post", ("post", "p50_ms", "p99_ms"), " ms"),
        ("GET /v1/orders/{id} throughput", "httpx", "get", ("get", "per_second"), " req/s"),
        ("GET p50 / p99", "httpx", "get", ("get", "p50_ms", "p99_ms"), " ms"),
        ("GET /v1/orders/{id} throughput", "wrk", "wrk_get", ("get", "per_second"), " req/s"),
        ("GET p50 / p99", "wrk", "wrk_get", ("get", "p50_ms", "p99_ms"), " ms"),
        ("mixed: POST throughput", "httpx", "mixed", ("post", "per_second"), " orders/s"),
        ("mixed: GET p50 / p99", "httpx", "mixed", ("get", "p50_ms", "p99_ms"), " ms"),
    ]
    for title, tool, phase_name, (part, *fields), unit in rows:
        cells = [
            cell(databases[n].get(phase_name, {}).get(part), *fields, unit=unit) for n in names
        ]
        out.write(f"| {title} | {tool} | {' | '.join(cells)} |\n")
    for phase_name in ("post", "get", "wrk_get", "mixed"):
        cells = [
            f"{databases[n][phase_name].get('service_cpu_percent', '-')} % / "
            f"{databases[n][phase_name].get('client_cpu_percent', '-')} % / "
            f"{databases[n][phase_name].get('machine_busy_percent', '-')} %"
            for n in names
        ]
        tool = databases[names[0]][phase_name].get("tool", "-")
        out.write(
            f"| CPU: service / generator / machine ({phase_name}) | {tool} | "
            f"{' | '.join(cells)} |\n"
        )
    out.write(f"\ntarget: >= {target:.0f} orders/s on every database\n")
    out.flush()


def verdict(report: dict[str, Any], target: float) -> bool:
    met = True
    for row in report["databases"].values():
        met &= row["post"]["post"]["per_second"] >= target
        for phase_name in ("post", "get", "wrk_get", "mixed"):
            for part in ("post", "get"):
                figures = row[phase_name].get(part)
                if figures is not None and figures.get("errors"):
                    met = False
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients")
    parser.add_argument("--accounts", type=int, default=32, help="accounts the orders belong to")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
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
    sys.path.insert(0, str(ROOT))  # the app next to this script, not another checkout's
    report = asyncio.run(
        run(
            clients=args.clients,
            seconds=args.seconds,
            accounts=args.accounts,
            postgres_url=None if args.no_postgres else args.postgres_url,
            profile=args.profile,
        )
    )
    met = verdict(report, args.target)
    report["target_orders_per_second"] = args.target
    report["met"] = met
    print_report(report, args.target)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
