"""How soon does a terminate reach the provider, and the order `terminated`? Per provider.

Starts the provider simulators (`autoprovision sim`) and the service (`autoprovision serve`) as
their own processes on a fresh SQLite file. ROUNDS times per provider, one at a time: an order
for 1x H100 there, stock for it, and once it runs, `POST /v1/orders/{id}/terminate`. The script
times, from the moment the terminate is sent:

- to the provider's delete call arriving at its simulator (its request log's `received_at`):
  the intent's commit, the terminator being woken and the call itself;
- to the order reading `terminated` (polled every 10 ms): the provider showing the VM gone,
  which the terminator looks at again every 0.5 s while the VM is `deleting`.

The simulators delete in 0.2 boot times (0.06 s here); real providers take seconds to minutes,
which then dominate the second figure.

    .venv/bin/python bench/terminate.py [--rounds 20] [--json bench/results/terminate.json]
"""

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from common import free_port, git_revision, service_env, sim_ready_url, start, stop, wait_up

from app.simulators.control import SimControl

ADMIN_KEY = "bench-admin-key-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
MACHINES = {  # provider -> (sku, region), 1x H100 each
    "verda": ("1H100.80S.30V", "FIN-01"),
    "hyperstack": ("n3-H100x1", "CANADA-1"),
    "quantacloud": ("h100-sxm-x1", "us-midwest-4"),
}
DELETE_CALLS = {  # provider -> (method, path of the delete below its mount; {vm} its id)
    "verda": ("PUT", "/v1/instances"),
    "hyperstack": ("DELETE", "/v1/core/virtual-machines/{vm}"),
    "quantacloud": ("POST", "/api/v1/deployments/{vm}/stop"),
}
BOOT_SECONDS = 0.3


def percentiles(values: list[float]) -> dict[str, float]:
    """Median, p99 and max, in ms."""
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 1),
        "p99_ms": round(p99 * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


async def until(api: httpx.AsyncClient, key: dict[str, str], order_id: str, status: str) -> Any:
    """Poll the order every 10 ms until it is in `status` (60 s at most)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        order = (await api.get(f"/v1/orders/{order_id}", headers=key)).json()
        if order["status"] == status:
            return order
        await asyncio.sleep(0.01)
    raise RuntimeError(f"{order_id} did not get to {status}")


async def one_provider(
    provider: str, rounds: int, api: httpx.AsyncClient, sim: SimControl, key: dict[str, str]
) -> dict[str, Any]:
    sku, region = MACHINES[provider]
    method, path = DELETE_CALLS[provider]
    to_delete, to_terminated = [], []
    body = {"gpu_model": "H100", "gpu_count": 1, "providers": [provider],
            "max_price_per_hour": "5.00"}  # fmt: skip
    for _ in range(rounds):
        order_id = (await api.post("/v1/orders", json=body, headers=key)).json()["id"]
        await sim.stock(provider, sku, region, 1)
        running = await until(api, key, order_id, "running")
        vm_id = running["deployment"]["provider_vm_id"]
        sent = time.time()
        (await api.post(f"/v1/orders/{order_id}/terminate", headers=key)).raise_for_status()
        await until(api, key, order_id, "terminated")
        to_terminated.append(time.time() - sent)
        calls = [
            r["received_at"]
            for r in await sim.requests(provider)
            if (r["method"], r["path"]) == (method, path.format(vm=vm_id))
            and r["received_at"] >= sent
        ]
        to_delete.append(min(calls) - sent)
    return {
        "terminate_to_delete_call": percentiles(to_delete),
        "terminate_to_terminated": percentiles(to_terminated),
        "rounds": rounds,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"revision": git_revision(), "rounds": args.rounds}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        sim_port, api_port = free_port(), free_port()
        env = service_env(
            f"sqlite+aiosqlite:///{workdir / 'bench.db'}", ADMIN_KEY, sim_port, api_port
        )
        sim_process = start(
            [sys.executable, "-m", "app", "sim", "--port", str(sim_port)], env, workdir / "sim.log"
        )
        api_process = None
        try:
            await wait_up(sim_ready_url(sim_port), sim_process)
            async with SimControl(base_url=f"http://127.0.0.1:{sim_port}") as sim:
                await sim.reset_all(boot_seconds=BOOT_SECONDS, rate_limits=False)
                api_process = start(
                    [sys.executable, "-m", "app", "serve"], env, workdir / "service.log"
                )
                await wait_up(f"http://127.0.0.1:{api_port}/healthz", api_process)
                async with httpx.AsyncClient(
                    base_url=f"http://127.0.0.1:{api_port}", timeout=10
                ) as api:
                    account = (
                        await api.post("/v1/accounts", json={"name": "bench"}, headers=ADMIN)
                    ).json()
                    await api.post(
                        f"/v1/accounts/{account['id']}/credits",
                        json={"amount": "10000"},
                        headers=ADMIN,
                    )
                    key = {"Authorization": f"Bearer {account['api_key']}"}
                    for provider in MACHINES:
                        results[provider] = await one_provider(provider, args.rounds, api, sim, key)
        finally:
            if api_process is not None:
                stop(api_process, workdir / "service.log")
            stop(sim_process, workdir / "sim.log")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    results = asyncio.run(run(args))
    text = json.dumps(results, indent=2)
    sys.stdout.write(text + "\n")
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
