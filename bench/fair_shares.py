"""Does one client's flood leave another account answered? The 503s each side gets.

Starts the service (`autoprovision serve`, API only, demo mode, on a fresh SQLite file with DAYS
of generated stock history from `autoprovision demo-history`), makes two accounts, and in each
phase runs LOOPS flooding loops (threads, each one request after another on a kept-alive
connection, for at most ROUNDS requests or until the phase ends) while the other account sends
REQUESTS `GET /v1/orders` one after another from 127.0.0.1, once every loop had an answer:

- 90-day summaries: the flood is `GET /v1/stock/summary?window=90d` with the first account's key
  (issue 40: "20 loops of a slow read from one key made 37 of 37 of another account's requests
  503 overloaded");
- 7-day summaries: the same with `window=7d`, slow on one core once twenty run, but not a
  costly read: only the per-client share holds them back;
- catalogue, no key: the flood is `GET /v1/catalogue` without a key from 127.0.0.2.

Figures per phase: the other account's 503s (of REQUESTS) and the median and max in ms of its
200s; the flood's requests and its 503s; the service's peak resident memory so far (VmHWM, MB).

    .venv/bin/python bench/fair_shares.py [--days 90] [--loops 20] [--requests 37] \\
        [--json bench/results/fair_shares.json]
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from common import ROOT, free_port, git_revision, service_env, start, stop

ADMIN_KEY = "bench-admin-key-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
ROUNDS = 2000  # a flooding loop's bound, should the phase outlast it


@dataclass
class Flood:
    """LOOPS threads sending one GET after another until `stop` (or ROUNDS each)."""

    url: str
    source: str
    headers: dict[str, str]
    loops: int
    statuses: list[int] = field(default_factory=list)
    started: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> list[threading.Thread]:
        threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(self.loops)]
        for thread in threads:
            thread.start()
        return threads

    def _loop(self) -> None:
        transport = httpx.HTTPTransport(local_address=self.source)
        with httpx.Client(transport=transport, timeout=120) as client:
            for n in range(ROUNDS):
                if self.stop.is_set():
                    return
                try:
                    status = client.get(self.url, headers=self.headers).status_code
                except httpx.HTTPError:
                    status = 0
                with self.lock:
                    self.statuses.append(status)
                    self.started += n == 0


def phase(base: str, flood: Flood, other: dict[str, str], requests: int) -> dict[str, Any]:
    """The other account's REQUESTS reads while `flood` runs."""
    threads = flood.run()
    while flood.started < flood.loops:  # every loop has had an answer: the flood is on
        time.sleep(0.01)
    took: list[float] = []
    refused = 0
    with httpx.Client(base_url=base, timeout=120) as api:
        for _ in range(requests):
            began = time.perf_counter()
            status = api.get("/v1/orders", headers=other).status_code
            if status == 503:
                refused += 1
            elif status == 200:
                took.append(time.perf_counter() - began)
    flood.stop.set()
    for thread in threads:
        thread.join(timeout=300)
    ordered = sorted(took) or [0.0]
    return {
        "other_503": refused,
        "other_requests": requests,
        "other_median_ms": round(statistics.median(ordered) * 1000, 1),
        "other_max_ms": round(ordered[-1] * 1000, 1),
        "flood_requests": len(flood.statuses),
        "flood_503": flood.statuses.count(503),
    }


def peak_rss_mb(pid: int) -> float:
    """The process's resident memory at its highest so far (Linux), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def account(api: httpx.Client, name: str) -> dict[str, str]:
    """A new account's headers, its key used once (so the service has seen it)."""
    made = api.post("/v1/accounts", json={"name": name}, headers=ADMIN).json()
    headers = {"Authorization": f"Bearer {made['api_key']}"}
    api.get("/v1/account", headers=headers).raise_for_status()
    return headers


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Generate the history, start the service and run every phase."""
    results: dict[str, Any] = {"revision": git_revision(), "days": args.days, "loops": args.loops}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        port = free_port()
        env = service_env(
            f"sqlite+aiosqlite:///{workdir / 'bench.db'}",
            ADMIN_KEY,
            free_port(),
            port,
            AUTOPROVISION_WATCHER="false",
            AUTOPROVISION_STOCK_HISTORY_DAYS=str(max(90, int(args.days))),
        )
        history = ["demo-history", "--days", str(args.days), "--seed", "1"]
        with_root = {**env, "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-m", "app", *history], env=with_root, check=True)
        process = start([sys.executable, "-m", "app", "serve"], env, workdir / "service.log")
        base = f"http://127.0.0.1:{port}"
        try:
            with httpx.Client(base_url=base, timeout=30) as api:
                for _ in range(600):
                    try:
                        api.get("/healthz")
                        break
                    except httpx.TransportError:
                        time.sleep(0.1)
                flooder, other = account(api, "flood"), account(api, "other")
                results["service_rss_at_start_mb"] = peak_rss_mb(process.pid)
            summary = base + "/v1/stock/summary?window="
            floods = {
                "90-day summaries": (summary + "90d", "127.0.0.1", flooder),
                "7-day summaries": (summary + "7d", "127.0.0.1", flooder),
                "catalogue, no key": (base + "/v1/catalogue", "127.0.0.2", {}),
            }
            for name, (url, source, headers) in floods.items():
                flood = Flood(url, source, headers, args.loops)
                results[name] = phase(base, flood, other, args.requests)
                results[name]["service_peak_rss_mb"] = peak_rss_mb(process.pid)
                sys.stderr.write(f"{name}: {results[name]}\n")
        finally:
            stop(process, workdir / "service.log")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--days", type=float, default=90)
    parser.add_argument("--loops", type=int, default=20)
    parser.add_argument("--requests", type=int, default=37)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    text = json.dumps(run(args), indent=2)
    sys.stdout.write(text + "\n")
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
