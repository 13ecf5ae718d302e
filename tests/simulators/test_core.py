"""The parts every simulator shares: control API, request faults, the rate-limit gate."""

import random
import time
from collections.abc import AsyncIterator
from decimal import Decimal

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from app.simulators.core import ProviderSimulator
from app.simulators.faults import FAULT_KINDS, draw_fault_arguments
from app.simulators.limits import FixedWindowLimiter
from app.simulators.serving import provider_app
from app.simulators.vms import CatalogEntry, SimVM

ENTRY = CatalogEntry(
    sku="8X.TEST",
    region="LAB-1",
    gpu_model="B300",
    gpu_count=8,
    price_per_hour=Decimal("40.00"),
    vcpus=240,
    ram_gb=2048,
    disk_gb=1000,
)


class DummySimulator(ProviderSimulator):
    """A provider with one endpoint, a 3-per-minute limit and JSON errors."""

    name = "dummy"
    catalog_entries = (ENTRY,)

    def vm_status(self, vm: SimVM) -> str:
        return "running" if self.progress(vm) >= 1 else "booting"

    def server_error_response(self, status: int = 500) -> Response:
        return JSONResponse({"error": "boom"}, status_code=status)

    def rate_limited_response(self, retry_after: float) -> Response:
        return JSONResponse(
            {"error": "slow down"}, status_code=429, headers={"Retry-After": str(int(retry_after))}
        )

    def rate_limit(self, request: Request) -> Response | None:
        wait = self.limiter.hit("all", 3, 60, 0.0)
        return None if wait is None else self.rate_limited_response(wait)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    sim = DummySimulator()

    async def hello(_request: Request) -> JSONResponse:
        return JSONResponse({"hello": "world"})

    inner = provider_app(sim, [Route("/v1/hello", hello)])
    outer = Starlette(routes=[Mount("/dummy", app=inner)])
    transport = httpx.ASGITransport(app=outer)
    async with httpx.AsyncClient(transport=transport, base_url="http://sim") as c:
        yield c


async def test_catalog_and_stock(client: httpx.AsyncClient) -> None:
    catalog = (await client.get("/dummy/_sim/catalog")).json()
    assert catalog == [
        {
            "sku": "8X.TEST",
            "region": "LAB-1",
            "gpu_model": "B300",
            "gpu_count": 8,
            "price_per_hour": "40.00",
            "stock": 0,
            "kind": "instance",
            "nodes": 1,
            "gpus_per_node": 8,
        }
    ]
    changed = await client.put(
        "/dummy/_sim/stock", json={"sku": "8X.TEST", "region": "LAB-1", "quantity": 2}
    )
    assert changed.status_code == 200 and changed.json()["changed_at"] > 0
    assert (await client.get("/dummy/_sim/catalog")).json()[0]["stock"] == 2


@pytest.mark.parametrize(
    "body",
    [
        {"sku": "8X.TEST", "region": "LAB-1", "quantity": -1},
        {"sku": "8X.TEST", "region": "LAB-1", "quantity": "3"},
        {"sku": "nope", "region": "LAB-1", "quantity": 1},
    ],
)
async def test_bad_stock_requests_are_refused(
    client: httpx.AsyncClient, body: dict[str, object]
) -> None:
    response = await client.put("/dummy/_sim/stock", json=body)
    assert response.status_code in (404, 422)


async def test_request_faults_hit_the_next_calls_but_never_the_control_api(
    client: httpx.AsyncClient,
) -> None:
    await client.put("/dummy/_sim/config", json={"rate_limits": False})
    added = await client.post("/dummy/_sim/faults", json={"kind": "http_500", "count": 2})
    assert added.status_code == 201
    assert (await client.get("/dummy/_sim/catalog")).status_code == 200
    assert [(await client.get("/dummy/v1/hello")).status_code for _ in range(3)] == [500, 500, 200]
    await client.post("/dummy/_sim/faults", json={"kind": "malformed_json"})
    broken = await client.get("/dummy/v1/hello")
    assert broken.status_code == 200
    with pytest.raises(ValueError):
        broken.json()
    await client.post("/dummy/_sim/faults", json={"kind": "http_429", "seconds": 7})
    limited = await client.get("/dummy/v1/hello")
    assert limited.status_code == 429 and limited.headers["retry-after"] == "7"


async def test_the_request_log_lists_api_calls_not_control_calls(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/dummy/_sim/faults", json={"kind": "http_500"})
    before = time.time()
    await client.get("/dummy/v1/hello")
    await client.post("/dummy/v1/hello")
    after = time.time()
    logged = (await client.get("/dummy/_sim/requests")).json()
    assert [(r["method"], r["path"], r["status"]) for r in logged] == [
        ("GET", "/v1/hello", 500),
        ("POST", "/v1/hello", 405),  # the dummy API has no POST
    ]
    # When each came and was answered, for a benchmark to time the service's share by.
    for r in logged:
        assert before <= r["received_at"] <= r["answered_at"] <= after
    await client.post("/dummy/_sim/reset")
    assert (await client.get("/dummy/_sim/requests")).json() == []


async def test_the_request_log_shows_query_and_body_with_secrets_masked(
    client: httpx.AsyncClient,
) -> None:
    """What anyone holds against a provider's document: `{method, path, query, body}`."""
    body = {
        "grant_type": "client_credentials",
        "client_secret": "s3cret",
        "nested": [{"script": "#!/bin/sh\necho hi", "user_data": "x", "name": "kept"}],
    }
    await client.post("/dummy/v1/hello", params=[("tag", "a"), ("tag", "b=c")], json=body)
    await client.get("/dummy/v1/hello", headers={"Authorization": "Bearer t0ken"})
    posted, read = (await client.get("/dummy/_sim/requests")).json()
    assert posted["query"] == [["tag", "a"], ["tag", "b=c"]]
    assert posted["body"] == {
        "grant_type": "client_credentials",
        "client_secret": "***",
        "nested": [{"script": "***", "user_data": "***", "name": "kept"}],
    }
    assert (read["query"], read["body"]) == ([], None)
    assert "s3cret" not in str(posted) and "t0ken" not in str(read)


async def test_unknown_fault_kinds_are_refused(client: httpx.AsyncClient) -> None:
    response = await client.post("/dummy/_sim/faults", json={"kind": "meteor"})
    assert response.status_code == 422


async def test_a_server_error_fault_answers_the_5xx_it_names(client: httpx.AsyncClient) -> None:
    await client.put("/dummy/_sim/config", json={"rate_limits": False})
    added = await client.post("/dummy/_sim/faults", json={"kind": "http_500", "status": 503})
    assert added.status_code == 201 and added.json()["status"] == 503
    assert [(await client.get("/dummy/v1/hello")).status_code for _ in range(2)] == [503, 200]


@pytest.mark.parametrize(
    "fault",
    [
        {"kind": "http_500", "status": 404},
        {"kind": "http_500", "status": 600},
        {"kind": "http_500", "status": "503"},
        {"kind": "http_500", "status": True},
        {"kind": "timeout", "status": 503},
    ],
)
async def test_a_fault_status_outside_5xx_or_on_another_kind_is_refused(
    client: httpx.AsyncClient, fault: dict[str, object]
) -> None:
    await client.put("/dummy/_sim/config", json={"rate_limits": False})
    response = await client.post("/dummy/_sim/faults", json=fault)
    assert response.status_code == 422
    assert (await client.get("/dummy/v1/hello")).status_code == 200  # nothing was queued


async def test_a_create_refusal_is_queued_with_its_status_reason_and_message(
    client: httpx.AsyncClient,
) -> None:
    fault = {"kind": "create_refused", "status": 409, "reason": "quota", "message": "No room"}
    added = await client.post("/dummy/_sim/faults", json=fault)
    assert added.status_code == 201
    assert added.json() == {**fault, "count": 1, "seconds": 0.0}


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        ({"status": 503}, "status must be an integer from 400 to 499"),
        ({"status": "400"}, "status must be an integer from 400 to 499"),
        ({"reason": 7}, "reason must be null or a string of 1 to 64 characters"),
        ({"reason": ""}, "reason must be null or a string of 1 to 64 characters"),
        ({"reason": "x" * 65}, "reason must be null or a string of 1 to 64 characters"),
        ({"reason": "bad\nline"}, "reason must not contain control characters"),
        ({"message": None}, "message must be a string of 1 to 1000 characters"),
        ({"message": "m" * 1001}, "message must be a string of 1 to 1000 characters"),
        ({"message": "nul\u0000"}, "message must not contain control characters"),
    ],
)
async def test_a_create_refusal_that_is_not_a_4xx_with_text_is_refused(
    client: httpx.AsyncClient, fault: dict[str, object], problem: str
) -> None:
    body = {"kind": "create_refused", "status": 400, "reason": "r", "message": "m", **fault}
    response = await client.post("/dummy/_sim/faults", json=body)
    assert response.status_code == 422
    assert response.json()["error"].startswith(problem)


@pytest.mark.parametrize("kind", FAULT_KINDS)
async def test_every_drawn_fault_is_one_the_simulators_take(
    client: httpx.AsyncClient, kind: str
) -> None:
    # The chaos run draws its faults here; one the control API refused stopped a CI run.
    rng = random.Random(kind)
    for _ in range(20):
        body = {"kind": kind, **draw_fault_arguments(rng, kind)}
        response = await client.post("/dummy/_sim/faults", json=body)
        assert response.status_code == 201, response.json()


async def test_reason_and_message_belong_to_create_refusals_only(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post("/dummy/_sim/faults", json={"kind": "http_500", "reason": "x"})
    assert (response.status_code, response.json()["error"]) == (
        422,
        "reason and message apply to create_refused faults only",
    )


async def test_rate_limits_apply_to_the_real_api_and_can_be_switched_off(
    client: httpx.AsyncClient,
) -> None:
    codes = [(await client.get("/dummy/v1/hello")).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    config = (await client.get("/dummy/_sim/config")).json()
    assert config["refused_by_rate_limits"] == 1  # counted for a soak to read
    await client.put("/dummy/_sim/config", json={"rate_limits": False})
    assert (await client.get("/dummy/v1/hello")).status_code == 200


async def test_reset_forgets_everything(client: httpx.AsyncClient) -> None:
    await client.put("/dummy/_sim/stock", json={"sku": "8X.TEST", "region": "LAB-1", "quantity": 5})
    await client.post("/dummy/_sim/faults", json={"kind": "http_500"})
    changed = {"boot_seconds": 0.5, "balance": "12.5", "hour_seconds": 60}
    await client.put("/dummy/_sim/config", json=changed)
    await client.post("/dummy/_sim/reset")
    assert (await client.get("/dummy/_sim/catalog")).json()[0]["stock"] == 0
    assert (await client.get("/dummy/v1/hello")).status_code == 200
    config = (await client.get("/dummy/_sim/config")).json()
    assert config == {
        "boot_seconds": 3.0,
        "hour_seconds": 3600.0,
        "rate_limits": True,
        "refused_by_rate_limits": 0,
        "balance": "10000.00",
        "latency_ms": 0.0,
        "jitter_ms": 0.0,
    }


def test_fixed_windows_reset_after_the_window() -> None:
    limiter = FixedWindowLimiter()
    assert [limiter.hit("k", 2, 60, t) for t in (0, 1, 2)] == [None, None, 58]
    assert limiter.hit("k", 2, 60, 61) is None
    assert limiter.hit("other", 2, 60, 2) is None
