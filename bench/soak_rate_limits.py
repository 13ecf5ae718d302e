"""Does the poll budget ever earn a 429? A soak against the simulators enforcing the limits.

Starts the simulators and the service (demo mode, planned polling) as separate processes, keeps
100 orders waiting across the three providers, and every few seconds puts a burst of one to
three machines in stock at one provider for a few seconds: creates go out, the VMs are followed
until they run, balances are read, and every deployed order is replaced by a new waiting one.
At the end it reads each simulator's count of 429s sent because a published limit was passed
(`refused_by_rate_limits`), the stock reads per minute, and the deploys; it fails if any
simulator sent a 429. Loopback only; the loop ends by itself after --minutes.

    .venv/bin/python bench/soak_rate_limits.py [--minutes 30] [--json bench/results/soak.json]
"""

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from common import free_port, service_env, sim_ready_url, stop, wait_up
from prometheus_client.parser import text_string_to_metric_families
from stock_to_create import ADMIN_KEY, MACHINES, start

from app.simulators.control import SimControl

WAITING = 100


def order_body(provider: str) -> dict[str, Any]:
    machine = MACHINES[provider]
    return {
        "gpu_model": machine["gpu_model"],
        "gpu_count": 1,
        "providers": [provider],
        "max_price_per_hour": "5.00",
    }


def metric_totals(text: str, name: str, label: str) -> dict[str, float]:
    """`name`'s samples summed per value of `label`, from a /metrics page."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                key = sample.labels.get(label, "")
                totals[key] = totals.get(key, 0.0) + sample.value
    return totals


async def soak(minutes: float, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    workdir = Path(tempfile.mkdtemp(prefix="ap-soak-"))
    sim_port, api_port = free_port(), free_port()
    database_url = f"sqlite+aiosqlite:///{workdir / 'soak.db'}"
    env = service_env(database_url, ADMIN_KEY, sim_port, api_port, AUTOPROVISION_POLL_PLAN="true")
    sim_process = start(["sim", "--port", str(sim_port)], env, workdir / "sim.log")
    api_process = None
    try:
        await wait_up(sim_ready_url(sim_port), sim_process)
        api_process = start(["serve"], env, workdir / "service.log")
        await wait_up(f"http://127.0.0.1:{api_port}/healthz", api_process)
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_port}", timeout=10) as api,
            SimControl(base_url=f"http://127.0.0.1:{sim_port}", timeout=10) as sim,
        ):
            admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
            account = (await api.post("/v1/accounts", json={"name": "soak"}, headers=admin)).json()
            await api.post(
                f"/v1/accounts/{account['id']}/credits", json={"amount": "1000000"}, headers=admin
            )
            headers = {"Authorization": f"Bearer {account['api_key']}"}
            providers = list(MACHINES)
            for n in range(WAITING):
                body = order_body(providers[n % len(providers)])
                (await api.post("/v1/orders", json=body, headers=headers)).raise_for_status()
            bursts = 0
            deadline = time.monotonic() + minutes * 60
            while time.monotonic() < deadline:
                await asyncio.sleep(rng.uniform(2, 8))
                provider = rng.choice(providers)
                machine = MACHINES[provider]
                units = rng.randint(1, 3)
                await sim.stock(provider, machine["sku"], machine["region"], units)
                await asyncio.sleep(rng.uniform(2, 6))
                await sim.stock(provider, machine["sku"], machine["region"], 0)
                bursts += 1
                listed = await api.get("/v1/orders?status=waiting&limit=100", headers=headers)
                waiting = listed.json().get("data", []) if listed.is_success else []
                per_provider = dict.fromkeys(providers, 0)
                for order in waiting:
                    per_provider[order["providers"][0]] += 1
                for p, count in per_provider.items():
                    for _ in range(WAITING // len(providers) - count):
                        await api.post("/v1/orders", json=order_body(p), headers=headers)
            metrics = (await api.get("/metrics")).text
            refused = {p: (await sim.config(p))["refused_by_rate_limits"] for p in providers}
            creates = {p: len(await sim.creates(p)) for p in providers}
    finally:
        for process in (api_process, sim_process):
            if process is not None:
                stop(process, workdir)
    reads = metric_totals(metrics, "autoprovision_poll_seconds_count", "provider")
    held = metric_totals(metrics, "autoprovision_provider_requests_held_total", "provider")
    return {
        "minutes": minutes,
        "waiting_orders": WAITING,
        "bursts": bursts,
        "providers": {
            p: {
                "rate_limited_429s": refused[p],
                "creates": creates[p],
                "stock_reads_per_minute": round(reads.get(p, 0.0) / minutes, 1),
                "requests_held_back": held.get(p, 0.0),
            }
            for p in MACHINES
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    report = asyncio.run(soak(args.minutes, args.seed))
    print(f"\n{args.minutes:g} minutes, {report['bursts']} stock bursts, 100 orders waiting")  # noqa: T201
    print("| provider | 429s | creates | stock reads a minute | requests held back |")  # noqa: T201
    print("|---|---|---|---|---|")  # noqa: T201
    for p, r in report["providers"].items():
        print(  # noqa: T201
            f"| {p} | {r['rate_limited_429s']} | {r['creates']} | "
            f"{r['stock_reads_per_minute']} | {r['requests_held_back']:g} |"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if all(r["rate_limited_429s"] == 0 for r in report["providers"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
