"""One provider misbehaves while another has stock: the other deploys on time, nothing hangs,
and every order ends in a state that says why."""

import time
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY

from app.settings import Settings
from app.simulators.control import SimControl
from tests.factories import AccountHandle, create_account, order_body
from tests.waiting import eventually, poll_count

# How long the troubled provider's faults would hold up anything that waited on it (its read
# timeout, its Retry-After): several times what the healthy deploy takes, so a loaded machine
# does not pass for a provider held up, nor the other way round.
TROUBLE_SECONDS = 6.0
VERDA_H100 = ("verda", "1H100.80S.30V", "FIN-01")
HYPER_H100 = ("hyperstack", "n3-H100x1", "CANADA-1")


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The watcher tests' settings, with reads that time out only after TROUBLE_SECONDS."""
    return settings.model_copy(update={"provider_timeout_seconds": TROUBLE_SECONDS})


def h100(provider: str) -> dict[str, Any]:
    return order_body(gpu_model="H100", gpu_count=1, providers=[provider], max_price_per_hour="3")


async def order(client: httpx.AsyncClient, account: AccountHandle, order_id: str) -> Any:
    return (await client.get(f"/v1/orders/{order_id}", headers=account.headers)).json()


def poll_errors(provider: str) -> float:
    """Failed stock reads of `provider` so far, of every kind."""
    total = 0.0
    for family in REGISTRY.collect():
        for sample in family.samples:
            if sample.name == "autoprovision_poll_errors_total":
                total += sample.value if sample.labels["provider"] == provider else 0.0
    return total


async def read_since(provider: str, errors: float, reads: float) -> bool:
    """The watcher has read `provider` since the counts were taken: a read has failed since
    (the simulator fails only once told to), or two more succeeded (the second began after)."""
    return poll_errors(provider) > errors or poll_count(provider) >= reads + 2


async def kinds(client: httpx.AsyncClient, account: AccountHandle, order_id: str) -> list[str]:
    events = await client.get(f"/v1/orders/{order_id}/events", headers=account.headers)
    return [e["kind"] for e in events.json()]


@pytest.mark.parametrize(
    ("fault", "extra"),
    [
        ("http_500", {"count": 1000}),
        ("http_429", {"count": 1000, "seconds": TROUBLE_SECONDS}),
        ("timeout", {"count": 1000, "seconds": TROUBLE_SECONDS + 2}),  # past the read timeout
        ("malformed_json", {"count": 1000}),
        ("capacity_race", {"count": 2}),
        ("fail_after_accept", {}),
    ],
)
async def test_a_misbehaving_provider_does_not_hold_up_another(
    client: httpx.AsyncClient, sim: SimControl, fault: str, extra: dict[str, Any]
) -> None:
    account = await create_account(client, credit="20")
    troubled = (
        await client.post("/v1/orders", json=h100("verda"), headers=account.headers)
    ).json()["id"]
    healthy = (
        await client.post("/v1/orders", json=h100("hyperstack"), headers=account.headers)
    ).json()["id"]
    errors, reads = poll_errors("verda"), poll_count("verda")
    await sim.fault("verda", fault, **extra)
    # the watcher met the fault (a read that times out takes TROUBLE_SECONDS to fail; one sent
    # just before may time out first, and a loaded CI machine once needed more than 11 s)
    await eventually(lambda: read_since("verda", errors, reads), seconds=2 * TROUBLE_SECONDS + 5)
    await sim.stock(*VERDA_H100, 2)  # a second unit for the retry after a failed VM
    started = time.monotonic()
    await sim.stock(*HYPER_H100, 1)

    async def healthy_deployed() -> bool:
        return (await order(client, account, healthy))["status"] in ("deployed", "running")

    await eventually(healthy_deployed, seconds=TROUBLE_SECONDS)
    assert time.monotonic() - started < TROUBLE_SECONDS / 2, "the healthy provider was held up"
    assert (await client.get("/healthz")).status_code == 200

    if fault in ("capacity_race", "fail_after_accept"):
        expected = "no_capacity" if fault == "capacity_race" else "vm_failed"

        async def explained_then_running() -> bool:
            shown = await order(client, account, troubled)
            return shown["status"] == "running" and expected in await kinds(
                client, account, troubled
            )

        await eventually(explained_then_running, seconds=8)
    else:

        async def read_error_shown() -> bool:
            offers = (await client.get("/v1/offers", headers=account.headers)).json()
            return any(p["provider"] == "verda" and p["error"] for p in offers["providers"])

        await eventually(read_error_shown, seconds=8)
        assert (await order(client, account, troubled))["status"] == "waiting"
        assert await sim.creates("verda") == []
