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
import uuid
from typing import Any

import httpx
from api_load import ONE_CONNECTION, TLS, Tally, back_off
from common import busy_percent, cpu_seconds, machine_cpu


async def _client(
    api: httpx.AsyncClient,
    keys: list[str],
    bodies: list[dict[str, Any]],
    until: float,
    tally: Tally,
    rng: random.Random,
) -> None:
    while time.monotonic() < until:
        headers = {
            "Authorization": f"Bearer {rng.choice(keys)}",
            "Idempotency-Key": str(uuid.uuid4()),
        }
        began = time.perf_counter()
        response: httpx.Response | None = None
        try:
            response = await api.post("/v1/orders", json=rng.choice(bodies), headers=headers)
            status: int | str = response.status_code
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        tally.add(time.perf_counter() - began, status)
        await back_off(response, until)


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
        await asyncio.gather(*(_client(api, keys, bodies, until, tally, rng) for api in apis))
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
