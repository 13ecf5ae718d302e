"""How long the README's example order takes to run in demo mode, as a new user meets it: the
service as `make run` starts it (embedded simulators, the random demo feed, demo orders), and
the README's order (8x B300 on any of the three providers, up to $48 an hour) placed, waited on
until it runs, and terminated, `--runs` times one after another. Prints each wait, the median
and the longest. All on 127.0.0.1.

    .venv/bin/python bench/demo_example.py --runs 10
"""

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from common import free_port, start, stop, wait_up

ORDER = {"gpu_model": "B300", "gpu_count": 8, "providers": ["verda", "hyperstack", "quantacloud"],
         "max_price_per_hour": "48"}  # fmt: skip
GIVE_UP_SECONDS = 900
DEMO_KEY = re.compile(r"Demo account API key: (\S+)")


async def one_run(client: httpx.AsyncClient, headers: dict[str, str]) -> float:
    """Seconds from placing the README's order to seeing it run (it is terminated after)."""
    began = time.monotonic()
    placed = await client.post("/v1/orders", json=ORDER, headers=headers)
    placed.raise_for_status()
    order_id = placed.json()["id"]
    while time.monotonic() - began < GIVE_UP_SECONDS:
        status = (await client.get(f"/v1/orders/{order_id}", headers=headers)).json()["status"]
        if status == "running":
            took = time.monotonic() - began
            await client.post(f"/v1/orders/{order_id}/terminate", headers=headers)
            return took
        await asyncio.sleep(0.25)
    raise RuntimeError(f"{order_id} did not run within {GIVE_UP_SECONDS} s")


async def run(runs: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="demo-example-") as tmp:
        workdir = Path(tmp)
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROVISION_")}
        env.update(AUTOPROVISION_PORT=str(port), AUTOPROVISION_SIM_PORT=str(free_port()))
        log = workdir / "serve.log"
        process = start([sys.executable, "-m", "app", "serve"], env, log)
        try:
            url = f"http://127.0.0.1:{port}"
            await wait_up(f"{url}/healthz", process)
            printed = DEMO_KEY.search(log.read_text())
            assert printed, log.read_text()
            key = printed.group(1)
            headers = {"Authorization": f"Bearer {key}"}
            async with httpx.AsyncClient(base_url=url, timeout=10) as client:
                waits = [round(await one_run(client, headers), 1) for _ in range(runs)]
        finally:
            stop(process, log)
    return {
        "runs": runs,
        "waits_seconds": waits,
        "median_seconds": statistics.median(waits),
        "longest_seconds": max(waits),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.runs)), indent=2))  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
