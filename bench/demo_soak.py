"""Whether the demo lasts: the service as `make run` starts it (embedded simulators, the demo
feed, the demo orders) left running for `--minutes`, stopped and started again half way, on
127.0.0.1. Every `--every` seconds it reads the demo account and its orders; at the end it says
whether the account always had money and machines running, and whether the machines running
before the restart were running after it under the same provider ids.

    .venv/bin/python bench/demo_soak.py --minutes 120
"""

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from common import free_port, start, stop, wait_up

DEMO_KEY = re.compile(r"Demo account API key: (\S+)")
WARM_UP_SECONDS = 300  # the first machines deploy in the first minutes
REREAD_SECONDS = 120  # the running watch reads every machine again after a restart


async def machines(client: httpx.AsyncClient, headers: dict[str, str]) -> dict[str, str]:
    """Each running order's provider id, by order id."""
    running: dict[str, str] = {}
    cursor = None
    while True:
        params = {"status": "running", **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/orders", params=params, headers=headers)).json()
        for order in page["data"]:
            running[order["id"]] = order["deployment"]["provider_vm_id"]
        cursor = page.get("next_cursor")
        if not cursor:
            return running


async def sample(
    client: httpx.AsyncClient, headers: dict[str, str], began: float
) -> dict[str, Any]:
    account = (await client.get("/v1/account", headers=headers)).json()
    running = await machines(client, headers)
    return {
        "at_s": round(time.monotonic() - began),
        "available": account["available"],
        "running": len(running),
        "machines": running,
    }


async def after_restart(
    client: httpx.AsyncClient, headers: dict[str, str], before: dict[str, str]
) -> dict[str, str]:
    """The machines still running under the same ids once the running watch has read them all
    again (or REREAD_SECONDS have passed)."""
    deadline = time.monotonic() + REREAD_SECONDS
    while True:
        now = await machines(client, headers)
        kept = {o: vm for o, vm in before.items() if now.get(o) == vm}
        if len(kept) == len(before) or time.monotonic() > deadline:
            return kept
        await asyncio.sleep(2)


async def run(minutes: float, every: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="demo-soak-") as tmp:
        workdir = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROVISION_")}
        env.update(AUTOPROVISION_PORT=str(free_port()), AUTOPROVISION_SIM_PORT=str(free_port()))
        url = f"http://127.0.0.1:{env['AUTOPROVISION_PORT']}"
        samples: list[dict[str, Any]] = []
        restart: dict[str, Any] = {}
        began = time.monotonic()
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            for leg in (1, 2):
                log = workdir / f"serve-{leg}.log"
                process = start([sys.executable, "-m", "app", "serve"], env, log)
                try:
                    await wait_up(f"{url}/healthz", process)
                    printed = DEMO_KEY.search(log.read_text())
                    assert printed, log.read_text()
                    headers = {"Authorization": f"Bearer {printed.group(1)}"}
                    if leg == 2:
                        kept = await after_restart(client, headers, restart["before"])
                        restart.update(
                            kept=len(kept), restarted_at_s=round(time.monotonic() - began)
                        )
                    leg_end = began + minutes * 60 * leg / 2
                    while time.monotonic() < leg_end:
                        samples.append(await sample(client, headers, began))
                        await asyncio.sleep(min(every, max(0.0, leg_end - time.monotonic())))
                    if leg == 1:
                        restart["before"] = (await sample(client, headers, began))["machines"]
                finally:
                    stop(process, log)
    warm_up = min(WARM_UP_SECONDS, minutes * 60 / 4)
    warm = [s for s in samples if s["at_s"] >= warm_up]
    return {
        "minutes": minutes,
        "samples": len(samples),
        "lowest_available": str(min(Decimal(s["available"]) for s in samples)),
        "last_available": samples[-1]["available"],
        "fewest_running_after_warm_up": min(s["running"] for s in warm),
        "most_running": max(s["running"] for s in samples),
        "running_at_end": samples[-1]["running"],
        "samples_without_a_machine_after_warm_up": sum(1 for s in warm if s["running"] == 0),
        "running_before_restart": len(restart["before"]),
        "same_machines_running_after_restart": restart["kept"],
        # What issue 41 asks: money all along, machines at the end, the same ones on after the
        # restart. Demo machines end by their limits and wait for the feed again, so a sample
        # may find none running: counted above, not a failure.
        "held": all(Decimal(s["available"]) > 0 for s in samples)
        and samples[-1]["running"] > 0
        and restart["kept"] == len(restart["before"]),
        "running_over_time": [(s["at_s"], s["running"], s["available"]) for s in samples],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=120)
    parser.add_argument("--every", type=float, default=60, help="seconds between samples")
    args = parser.parse_args()
    result = asyncio.run(run(args.minutes, args.every))
    series = result.pop("running_over_time")
    print(json.dumps(result, indent=2))  # noqa: T201
    print(json.dumps({"running_over_time": series}))  # noqa: T201
    return 0 if result["held"] else 1


if __name__ == "__main__":
    sys.exit(main())
