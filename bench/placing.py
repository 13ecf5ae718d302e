"""Orders placed as fast as the replicas take them: the placing phase of `scale_watcher.py`.

Each client has its own connection to one replica (round robin over the replicas), places
orders back to back for a random account with its own Idempotency-Key, and after a `503` waits
as its `Retry-After` says, as the README asks clients to. `201`s count for the rate and the
latencies; `503`s are counted apart; anything else is an error.
"""

import asyncio
import contextlib
import random
import time
from typing import Any

import httpx
from api_load import ONE_CONNECTION, TLS, Tally, poster
from common import busy_percent, cpu_seconds, machine_cpu


async def place_for(
    urls: list[str],
    pids: list[int],
    *,
    keys: list[str],
    bodies: list[dict[str, Any]],
    clients: int,
    seconds: float,
    rng: random.Random,
) -> dict[str, Any]:
    """`clients` clients spread over the replicas at `urls` place orders for `seconds`."""
    tally = Tally()
    async with contextlib.AsyncExitStack() as stack:
        apis = [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=urls[n % len(urls)], timeout=60, limits=ONE_CONNECTION, verify=TLS
                )
            )
            for n in range(clients)
        ]
        until = time.monotonic() + seconds
        service_before, machine_before = cpu_seconds(*pids), machine_cpu()
        began = time.monotonic()
        placed: list[tuple[str, str]] = []
        await asyncio.gather(
            *(
                poster(api, keys, until, tally, placed, rng, lambda r, _n: r.choice(bodies))
                for api in apis
            )
        )
        elapsed = time.monotonic() - began
        service = cpu_seconds(*pids) - service_before
    return {
        "clients": clients,
        "replicas": len(urls),
        "seconds": round(elapsed, 1),
        "post": tally.summary(elapsed),
        "service_cpu_percent": round(100 * service / elapsed, 1),
        "machine_busy_percent": busy_percent(machine_before),
    }
