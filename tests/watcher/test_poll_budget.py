"""The watcher with no poll period set: stock reads planned by each provider's budget, against
the simulators enforcing the published limits."""

import httpx
import pytest
from prometheus_client import REGISTRY

from app.providers.registry import simulated
from app.settings import Settings
from app.simulators.control import SimControl
from tests.factories import create_account
from tests.fixtures.settings import live_settings
from tests.waiting import eventually, polled
from tests.watcher.orders import VERDA_H100, h100, place, reaches

# Slow: the watcher runs against the simulators on the real clock.
pytestmark = pytest.mark.slow


@pytest.fixture
def settings(database_url: str, sim_url: str, sim: SimControl) -> Settings:
    return simulated(live_settings(database_url, sim_url), sim_url, poll_seconds=None)


def rate(provider: str, bucket: str, kind: str) -> float | None:
    labels = {"provider": provider, "bucket": bucket, "kind": kind}
    return REGISTRY.get_sample_value("autoprovision_provider_requests_per_minute", labels)


def rate_limited(provider: str) -> float:
    labels = {"provider": provider, "kind": "rate_limited"}
    return REGISTRY.get_sample_value("autoprovision_poll_errors_total", labels) or 0.0


async def test_verda_reads_the_waited_for_type_besides_the_full_list_and_deploys(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    refused = rate_limited("verda")
    account = await create_account(client, credit="10")
    order_id = await place(client, account, h100(providers=["verda"]))
    await polled("verda", times=3)
    type_bucket = "GET /instance-availability/1H100.80S.30V"

    async def both_read() -> bool:
        used = [rate("verda", b, "used") for b in ("GET /instance-availability", type_bucket)]
        return all(u is not None and u > 0 for u in used)

    await eventually(both_read)
    assert rate("verda", type_bucket, "limit") == 60
    assert rate("verda", "project", "limit") == 500
    await sim.stock(*VERDA_H100, 1)
    await reaches(client, account, order_id, "deployed")
    assert rate_limited("verda") == refused


async def test_each_bucket_shows_its_limit_plan_and_use(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    refused = {p: rate_limited(p) for p in ("hyperstack", "quantacloud")}
    account = await create_account(client, credit="10")
    await place(client, account, h100(providers=["hyperstack", "quantacloud"]))
    await polled("hyperstack", times=3)
    await polled("quantacloud", times=3)
    assert rate("hyperstack", "ip", "limit") == 500
    assert rate("quantacloud", "ip", "limit") == 200  # 3,000 per 15 minutes
    for provider in ("hyperstack", "quantacloud"):
        planned, used = rate(provider, "ip", "planned"), rate(provider, "ip", "used")
        assert planned is not None and used is not None
        limit = rate(provider, "ip", "limit")
        assert limit is not None and 0 < used < planned < limit  # a margin is kept for creates
        assert rate_limited(provider) == refused[provider]
    metrics = await client.get("/metrics")
    assert 'autoprovision_provider_requests_per_minute{bucket="ip"' in metrics.text
