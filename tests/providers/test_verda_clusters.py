"""Verda's cluster calls (`app/providers/verda/clusters.py`) against the simulated Verda on a
real socket: what each answer is, and each failure's typed outcome."""

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.providers.base import (
    NoCapacity,
    OutcomeUnknown,
    ProviderOutOfFunds,
    RateLimited,
    Refused,
    Rejected,
    Unavailable,
    VMState,
)
from app.providers.verda import cluster_parse
from app.providers.verda.client import DeleteRefused, VerdaClient
from app.providers.verda.clusters import VerdaClusters
from app.simulators.control import SimControlSync
from tests.clock import FakeClock
from tests.waiting import eventually

B200 = ("16B200", "FIN-01")
IMAGE = "ubuntu-24.04-cuda-13.0-cluster"
MISSING = "6b0e3c52-6a43-4c36-9d61-2f1f0a3b7c11"
TIMEOUT = 0.5  # for the client that is to time out
PATIENT = 10.0  # for the others: a bound for a hang, which a loaded machine must not reach

# The simulators are reset before each test, with quick boots.
pytestmark = pytest.mark.usefixtures("sim_sync")


@pytest.fixture
async def control(verda_url: str, sim_sync: SimControlSync) -> AsyncIterator[httpx.AsyncClient]:
    """The simulated Verda's control API (`/_sim`), every simulator reset first (before a
    class's autouse fixture sets it up)."""
    async with httpx.AsyncClient(base_url=verda_url) as client:
        yield client


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def make_api(http: httpx.AsyncClient, verda_url: str, timeout: float = PATIENT) -> VerdaClient:
    return VerdaClient(
        http,
        base_url=f"{verda_url}/v1",
        client_id=SecretStr("sim-client"),
        client_secret=SecretStr("sim-secret"),
        timeout=timeout,
        create_timeout=timeout,
    )


@pytest.fixture
async def api(http: httpx.AsyncClient, verda_url: str) -> VerdaClient:
    """A client with its token already fetched, so a request fault hits the call tested."""
    client = make_api(http, verda_url)
    await client.balance()
    return client


@pytest.fixture
def clusters(api: VerdaClient) -> VerdaClusters:
    return VerdaClusters(api)


async def stock(control: httpx.AsyncClient, sku: str, region: str, quantity: int) -> None:
    body = {"sku": sku, "region": region, "quantity": quantity}
    assert (await control.put("/_sim/stock", json=body)).status_code == 200


async def fault(control: httpx.AsyncClient, kind: str, **extra: Any) -> None:
    assert (await control.post("/_sim/faults", json={"kind": kind, **extra})).status_code == 201


def body(**overrides: Any) -> dict[str, Any]:
    """A cluster create as the SDK sends it, with an explicitly sized shared volume."""
    fields: dict[str, Any] = {
        "hostname": "ap-01jd3xq8w1-1",
        "cluster_type": B200[0],
        "image": IMAGE,
        "description": "autoprovision ap-order-01jd3xq8w1",
        "ssh_key_ids": [],
        "contract": "PAY_AS_YOU_GO",
        "location_code": B200[1],
        "shared_volume": {"name": "ap-01jd3xq8w1-1-home", "size": 1000},
    }
    return fields | overrides


async def created_at_sim(control: httpx.AsyncClient) -> list[tuple[str, str | None]]:
    """(outcome, id) of each create the simulator received."""
    return [(c["outcome"], c["vm_id"]) for c in (await control.get("/_sim/creates")).json()]


class TestCalls:
    async def test_cluster_types_and_availability(
        self, clusters: VerdaClusters, control: httpx.AsyncClient
    ) -> None:
        types = cluster_parse.cluster_types(await clusters.cluster_types())
        assert types["16B200"]["price_per_hour"] == "71.84"
        assert cluster_parse.cluster_availability(await clusters.cluster_availability()) == []
        await stock(control, *B200, 1)
        await stock(control, "8B200.240V", "FIN-01", 1)  # an instance: not a cluster
        assert cluster_parse.cluster_availability(await clusters.cluster_availability()) == [B200]
        images = [i["image_type"] for i in await clusters.cluster_images(B200[0])]
        assert IMAGE in images

    async def test_create_follow_list_and_discontinue(
        self, clusters: VerdaClusters, control: httpx.AsyncClient, sim_clock: FakeClock
    ) -> None:
        await stock(control, *B200, 1)
        cluster_id = await clusters.create_cluster(body(), where="16B200 in FIN-01")
        assert await created_at_sim(control) == [("created", cluster_id)]
        first = cluster_parse.cluster(await clusters.cluster(cluster_id))
        assert first is not None and (first.status, first.login_ip) == ("ordered", None)

        async def running() -> cluster_parse.Cluster | None:
            shown = cluster_parse.cluster(await clusters.cluster(cluster_id))
            return shown if shown is not None and shown.state is VMState.RUNNING else None

        up = await eventually(running, clock=sim_clock)
        assert up.login_ip is not None and len(up.nodes) == 2
        assert {n.status for n in up.nodes} == {"running"}
        assert all(n.private_ip for n in up.nodes)
        assert [c.id for c in cluster_parse.clusters(await clusters.clusters())] == [cluster_id]
        await clusters.discontinue_cluster(cluster_id)
        gone = cluster_parse.cluster(await clusters.cluster(cluster_id))
        assert gone is not None and gone.state is VMState.GONE
        assert cluster_parse.clusters(await clusters.clusters()) == []
        with pytest.raises(DeleteRefused) as again:  # the adapter reads it again: gone
            await clusters.discontinue_cluster(cluster_id)
        assert again.value.status_code == 403
        (shown,) = (await control.get("/_sim/clusters")).json()
        assert shown["shared_volume_size"] == 1000

    async def test_unknown_ids_are_none_and_discontinuing_them_is_fine(
        self, clusters: VerdaClusters
    ) -> None:
        assert await clusters.cluster(MISSING) is None
        assert await clusters.cluster("not an id/..") is None
        await clusters.discontinue_cluster(MISSING)

    async def test_a_refused_discontinue_is_delete_refused(
        self, clusters: VerdaClusters, control: httpx.AsyncClient
    ) -> None:
        await stock(control, *B200, 1)
        cluster_id = await clusters.create_cluster(body(), where="here")
        await fault(control, "delete_refused")
        with pytest.raises(DeleteRefused) as caught:
            await clusters.discontinue_cluster(cluster_id)
        assert caught.value.status_code == 403
        await clusters.discontinue_cluster(cluster_id)  # the fault was once: now it goes
        assert cluster_parse.clusters(await clusters.clusters()) == []

    async def test_a_broken_read_is_unavailable(
        self, clusters: VerdaClusters, control: httpx.AsyncClient
    ) -> None:
        await fault(control, "http_500")
        with pytest.raises(Unavailable):
            await clusters.clusters()
        assert await clusters.clusters() == []


class TestCreateOutcomes:
    @pytest.fixture(autouse=True)
    async def in_stock(self, control: httpx.AsyncClient) -> None:
        await stock(control, *B200, 1)

    async def test_a_5xx_on_the_create_is_outcome_unknown(
        self, clusters: VerdaClusters, control: httpx.AsyncClient
    ) -> None:
        await fault(control, "http_500", status=502)
        with pytest.raises(OutcomeUnknown) as caught:
            await clusters.create_cluster(body(), where="here")
        assert caught.value.status_code == 502

    async def test_an_error_after_commit_is_outcome_unknown_and_the_cluster_exists(
        self, clusters: VerdaClusters, control: httpx.AsyncClient
    ) -> None:
        await fault(control, "create_error_after_commit")
        with pytest.raises(OutcomeUnknown):
            await clusters.create_cluster(body(), where="here")
        ((outcome, made),) = await created_at_sim(control)
        assert outcome == "error_after_commit"
        assert [c.id for c in cluster_parse.clusters(await clusters.clusters())] == [made]

    async def test_a_create_that_times_out_is_outcome_unknown_and_made(
        self, http: httpx.AsyncClient, verda_url: str, control: httpx.AsyncClient
    ) -> None:
        impatient = make_api(http, verda_url, timeout=TIMEOUT)
        await impatient.balance()
        await fault(control, "create_delay", seconds=TIMEOUT + 0.3)
        with pytest.raises(OutcomeUnknown):
            await VerdaClusters(impatient).create_cluster(body(), where="here")
        assert [outcome for outcome, _ in await created_at_sim(control)] == ["created"]

    async def test_no_stock_is_no_capacity(
        self, clusters: VerdaClusters, control: httpx.AsyncClient
    ) -> None:
        await clusters.create_cluster(body(), where="here")  # takes the one in stock
        with pytest.raises(NoCapacity) as caught:
            await clusters.create_cluster(body(), where="here")
        assert caught.value.status_code == 503
        await fault(control, "capacity_race")
        await stock(control, *B200, 1)
        with pytest.raises(NoCapacity):
            await clusters.create_cluster(body(), where="here")
        assert [o for o, _ in await created_at_sim(control)] == [
            "created",
            "no_capacity",
            "capacity_race",
        ]

    async def test_a_low_balance_is_insufficient_funds(
        self, clusters: VerdaClusters, control: httpx.AsyncClient
    ) -> None:
        await control.put("/_sim/config", json={"balance": "71"})
        with pytest.raises(ProviderOutOfFunds):
            await clusters.create_cluster(body(), where="here")

    async def test_429_on_a_create_is_rate_limited(
        self, clusters: VerdaClusters, control: httpx.AsyncClient
    ) -> None:
        await fault(control, "http_429", seconds=3)
        with pytest.raises(RateLimited) as caught:
            await clusters.create_cluster(body(), where="here")
        assert caught.value.retry_after == 3

    async def test_a_wrong_request_is_rejected_and_nothing_is_made(
        self, clusters: VerdaClusters, control: httpx.AsyncClient
    ) -> None:
        with pytest.raises(Rejected) as caught:  # "Image is not a cluster image"
            await clusters.create_cluster(
                body(image="ubuntu-24.04-cuda-12.8-open-docker"), where="here"
            )
        assert caught.value.status_code == 400
        assert await created_at_sim(control) == [("rejected", None)]

    async def test_a_refusal_naming_no_field_of_ours_is_refused_and_nothing_is_made(
        self, clusters: VerdaClusters, control: httpx.AsyncClient
    ) -> None:
        with pytest.raises(Refused) as caught:  # "Invalid cluster type"
            await clusters.create_cluster(body(cluster_type="8B200.240V"), where="here")
        assert (caught.value.status_code, caught.value.reason) == (400, "invalid_request")
        await fault(control, "create_refused", status=403, reason="forbidden_action", message="no")
        with pytest.raises(Refused):
            await clusters.create_cluster(body(), where="here")
        assert await created_at_sim(control) == [("rejected", None), ("refused", None)]
