"""How soon does an event reach a stream? On the replica that wrote it, and on another one.

Starts the service API-only (`autoprovision serve`, AUTOPROVISION_WATCHER=false) as its own
processes: one on a fresh SQLite file, then two replicas (A and B) on one fresh PostgreSQL
database (created on the server of --postgres-url and dropped afterwards). An account holds an
event stream open on each process; then, ROUNDS times, an order is placed through A's API and
the script times, from A's 201 answer (the order and its timeline line committed) to the
arrival of that order's `order.placed` event on each stream. Rounds are spaced at random
(0-300 ms) so they do not fall in step with the publisher's 0.2 s poll.

Figures: median, p90, p99 and max of that delay per stream. The issue's target: an event
written by another replica arrives within a second.

    .venv/bin/python bench/stream_latency.py [--rounds 100] \
        [--postgres-url postgresql+asyncpg://postgres@127.0.0.1:5432/test] \
        [--json bench/results/stream_latency.json]
"""

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from common import free_port, git_revision, pg_admin, service_env, start, stop, wait_up
from httpx_sse import aconnect_sse
from sqlalchemy.engine import make_url

ADMIN_KEY = "bench-admin-key-0123456789"
ORDER = {
    "gpu_model": "B300",
    "gpu_count": 8,
    "providers": ["verda"],
    "max_price_per_hour": "45.00",
}


@asynccontextmanager
async def services(database_url: str, count: int, workdir: Path) -> AsyncIterator[list[str]]:
    """`count` service processes on one database; their base URLs."""
    processes, urls = [], []
    try:
        for index in range(count):
            port = free_port()
            env = service_env(
                database_url,
                ADMIN_KEY,
                free_port(),
                port,
                AUTOPROVISION_WATCHER="false",
                AUTOPROVISION_SECRET_KEY_FILE=str(workdir / "secret.key"),
            )
            log = workdir / f"service-{index}.log"
            process = start([sys.executable, "-m", "app", "serve"], env, log)
            processes.append((process, log))
            url = f"http://127.0.0.1:{port}"
            await wait_up(f"{url}/healthz", process)
            urls.append(url)
        yield urls
    finally:
        for process, log in processes:
            stop(process, log)


def percentiles(values: list[float]) -> dict[str, float]:
    """Median, p90, p99 and max, in ms."""
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "median_ms": round(statistics.median(ordered) * 1000, 1),
        "p90_ms": round(at(0.90) * 1000, 1),
        "p99_ms": round(at(0.99) * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


async def follow(url: str, key: str, arrived: dict[str, float], opened: asyncio.Event) -> None:
    """Hold a stream open on `url`; note when each order's `order.placed` event arrives."""
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(base_url=url, timeout=None) as client,
        aconnect_sse(client, "GET", "/v1/events/stream", headers=headers) as source,
    ):
        opened.set()
        async for sse in source.aiter_sse():
            if sse.event == "order.placed":
                arrived[json.loads(sse.data)["order_id"]] = time.monotonic()


async def measure(urls: list[str], rounds: int) -> dict[str, dict[str, float]]:
    """Place `rounds` orders on the first URL; the delay to each URL's stream."""
    writer = urls[0]
    async with httpx.AsyncClient(base_url=writer, timeout=30) as client:
        made = await client.post(
            "/v1/accounts", json={"name": "bench"}, headers={"Authorization": f"Bearer {ADMIN_KEY}"}
        )
        key = made.json()["api_key"]
        arrivals: list[dict[str, float]] = [{} for _ in urls]
        openings = [asyncio.Event() for _ in urls]
        readers = [
            asyncio.create_task(follow(url, key, arrived, opened))
            for url, arrived, opened in zip(urls, arrivals, openings, strict=True)
        ]
        await asyncio.wait_for(asyncio.gather(*(o.wait() for o in openings)), 30)
        committed: dict[str, float] = {}
        rng = random.Random(16)
        for _ in range(rounds):
            answer = await client.post(
                "/v1/orders", json=ORDER, headers={"Authorization": f"Bearer {key}"}
            )
            answer.raise_for_status()
            committed[answer.json()["id"]] = time.monotonic()
            await asyncio.sleep(rng.uniform(0, 0.3))
        deadline = time.monotonic() + 30
        while any(len(a) < rounds for a in arrivals) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for reader in readers:
            reader.cancel()
    figures = {}
    for index, arrived in enumerate(arrivals):
        name = "same process" if index == 0 else f"replica {index + 1} (another process)"
        delays = [arrived[o] - t for o, t in committed.items() if o in arrived]
        figures[name] = {**percentiles(delays), "received": len(delays), "sent": rounds}
    return figures


async def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"revision": git_revision(), "rounds": args.rounds}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        sqlite_url = f"sqlite+aiosqlite:///{workdir / 'bench.db'}"
        async with services(sqlite_url, 1, workdir) as urls:
            results["sqlite"] = await measure(urls, args.rounds)
        name = f"ap_bench_stream_{uuid.uuid4().hex[:8]}"
        await pg_admin(args.postgres_url, f'CREATE DATABASE "{name}"')
        try:
            pg_url = make_url(args.postgres_url).set(database=name)
            async with services(pg_url.render_as_string(hide_password=False), 2, workdir) as urls:
                results["postgresql"] = await measure(urls, args.rounds)
        finally:
            await pg_admin(args.postgres_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    other = results["postgresql"]["replica 2 (another process)"]
    results["targets"] = {
        "postgresql: every event reached the other replica": other["received"] == args.rounds,
        "postgresql: another replica's events arrive within 1 s (max)": other["max_ms"] <= 1000,
    }
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument(
        "--postgres-url", default="postgresql+asyncpg://postgres@127.0.0.1:5432/test"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    results = asyncio.run(run(args))
    text = json.dumps(results, indent=2)
    sys.stdout.write(text + "\n")
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if all(results["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
