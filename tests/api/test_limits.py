"""The bound on requests in flight, each client's share of it and the costly reads' budget:
past them an immediate 503 with Retry-After, under them a pass."""

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.limits import InFlightLimit, RequestBody
from app.api.shares import KnownKeys, account_share
from app.main import create_app
from app.services.stock import reads as stock_reads
from app.settings import Settings
from tests.factories import AccountHandle, create_account
from tests.waiting import started


class Blocking:
    """An ASGI app whose requests wait for `release`; probes answer at once."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.inside = 0
        self.changed = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] not in ("/healthz", "/readyz", "/metrics"):
            self.inside += 1
            self.changed.set()
            await self.release.wait()
        await JSONResponse({"path": scope["path"]})(scope, receive, send)

    async def until_inside(self, count: int) -> None:
        while self.inside < count:
            self.changed.clear()
            await self.changed.wait()


def _client(app: ASGIApp) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver")


async def test_past_the_bound_requests_get_an_immediate_503_and_under_it_they_pass() -> None:
    inner = Blocking()
    limited = InFlightLimit(inner, limit=2)
    async with _client(limited) as client, asyncio.timeout(10):
        first = asyncio.create_task(client.get("/v1/orders/a"))
        second = asyncio.create_task(client.post("/v1/orders", json={}))
        await inner.until_inside(2)
        refused = await client.get("/v1/orders/c")  # answered while the two still block
        assert limited.in_flight == 2
        inner.release.set()
        assert [r.status_code for r in await asyncio.gather(first, second)] == [200, 200]
        assert limited.in_flight == 0
        again = await client.get("/v1/orders/d")
    assert refused.status_code == 503
    assert refused.headers["Retry-After"] == "1"
    assert refused.json()["error"]["code"] == "overloaded"
    assert "retry" in refused.json()["error"]["message"]
    assert again.status_code == 200
    assert inner.inside == 3  # the refused one never reached the app


async def test_probes_and_metrics_answer_past_the_bound() -> None:
    inner = Blocking()
    limited = InFlightLimit(inner, limit=1)
    async with _client(limited) as client, asyncio.timeout(10):
        blocked = asyncio.create_task(client.get("/v1/orders"))
        await inner.until_inside(1)
        refused = await client.get("/v1/account")
        probes = [await client.get(path) for path in ("/healthz", "/readyz", "/metrics")]
        inner.release.set()
        await blocked
    assert refused.status_code == 503  # the bound is reached: the control
    assert [p.status_code for p in probes] == [200, 200, 200]
    assert limited.in_flight == 0


async def test_a_request_that_fails_still_leaves_the_count() -> None:
    async def failing(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("boom")

    limited = InFlightLimit(failing, limit=1)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            await limited({"type": "http", "path": "/x", "headers": []}, _never, _nowhere)
    assert limited.in_flight == 0


async def _never() -> dict[str, object]:
    raise AssertionError("not read")


async def _nowhere(message: object) -> None:
    raise AssertionError("not sent")


class Gate:
    """A route's two events: it has entered, and it may finish."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()


@pytest.fixture
async def app_of_one(settings: Settings) -> AsyncIterator[tuple[FastAPI, Gate]]:
    """The service with room for one request at a time, and a route that blocks on events."""
    application = create_app(settings.model_copy(update={"max_requests_in_flight": 1}))
    gate = Gate()

    @application.get("/test/blocking")
    async def blocking() -> dict[str, str]:
        gate.entered.set()
        await gate.release.wait()
        return {"status": "done"}

    async with started(application):
        yield application, gate


async def test_the_service_applies_its_configured_bound(app_of_one: tuple[FastAPI, Gate]) -> None:
    application, gate = app_of_one
    async with _client(application) as client, asyncio.timeout(10):
        blocked = asyncio.create_task(client.get("/test/blocking"))
        await gate.entered.wait()
        refused = await client.get("/v1/catalogue")
        health = await client.get("/healthz")
        ready = await client.get("/readyz")
        gate.release.set()
        assert (await blocked).status_code == 200
        served = await client.get("/v1/catalogue")
        metrics = await client.get("/metrics")
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "overloaded"
    assert (health.status_code, ready.status_code) == (200, 200)
    assert served.status_code == 200
    assert "autoprovision_requests_shed_total" in metrics.text


async def test_a_request_gives_its_place_back_when_its_response_starts() -> None:
    started_answer = asyncio.Event()
    finish = asyncio.Event()

    async def slow_to_send(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] == "/slow":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            started_answer.set()
            await finish.wait()  # as a client that does not read keeps a write waiting
            await send({"type": "http.response.body", "body": b"done"})
            return
        await JSONResponse({"path": scope["path"]})(scope, receive, send)

    limited = InFlightLimit(slow_to_send, limit=1)
    async with _client(limited) as client, asyncio.timeout(10):
        slow = asyncio.create_task(client.get("/slow"))
        await started_answer.wait()
        assert limited.in_flight == 0
        served = await client.get("/v1/catalogue")
        finish.set()
        assert (await slow).status_code == 200
    assert served.status_code == 200


@pytest.mark.parametrize(
    ("length", "status"), [("9" * 5000, 413), ("65537", 413), ("0" * 40 + "2", 200)]
)
async def test_a_declared_length_is_judged_without_converting_thousands_of_digits(
    length: str, status: int
) -> None:
    sent: list[Message] = []

    async def answer(scope: Scope, receive: Receive, send: Send) -> None:
        await JSONResponse({"ok": True})(scope, receive, send)

    async def receive() -> Message:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "path": "/v1/orders",
        "headers": [(b"content-length", length.encode())],
    }
    await RequestBody(answer, timeout_seconds=1)(scope, receive, send)
    assert sent[0]["status"] == status


def _as(key: str | None) -> dict[str, str]:
    return {} if key is None else {"Authorization": f"Bearer {key}"}


async def test_a_client_past_its_share_takes_only_spare_room_the_rest_stay_for_the_others() -> None:
    inner = Blocking()
    known = KnownKeys()
    for name in ("ada", "bob", "cy"):
        known.learn(f"key-{name}", account_share(name))
    limited = InFlightLimit(inner, limit=5, per_client=2, known_keys=known)
    async with _client(limited) as client, asyncio.timeout(10):
        # Past its share of 2 while more than 2 places are free: 3 in all, then 2 stay free.
        ada = [asyncio.create_task(client.get("/v1/orders", headers=_as("key-ada"))) for _ in "123"]
        await inner.until_inside(3)
        ada_again = await client.get("/v1/orders", headers=_as("key-ada"))
        bob = asyncio.create_task(client.get("/v1/orders", headers=_as("key-bob")))
        await inner.until_inside(4)
        # Without a key, or with one never seen: one share, the address's, however many keys.
        made_up = asyncio.create_task(client.get("/v1/catalogue", headers=_as(None)))
        await inner.until_inside(5)
        another_made_up = await client.get("/v1/catalogue", headers=_as("made-up-2"))
        cy = await client.get("/v1/orders", headers=_as("key-cy"))  # every place is held
        inner.release.set()
        answered = await asyncio.gather(*ada, bob, made_up)
    assert [r.status_code for r in answered] == [200] * 5
    assert ada_again.status_code == 503
    assert ada_again.headers["Retry-After"] == "1"
    assert ada_again.json()["error"]["code"] == "overloaded"
    assert "this client has 3 requests in flight" in ada_again.json()["error"]["message"]
    assert another_made_up.status_code == 503
    assert "too many requests at once" in another_made_up.json()["error"]["message"]
    assert cy.status_code == 503
    assert "too many requests at once" in cy.json()["error"]["message"]
    assert limited.in_flight == 0
    assert limited.places.by_share == {}


class LongSummaries:
    """The stock summary's read, made to wait for `release` when its window is longer than 7
    days (the estimate's read is left as it is: no test here holds a place with one)."""

    def __init__(self) -> None:
        self.blocking = Blocking()
        self.read = stock_reads.summary

    async def __call__(self, session: AsyncSession, **kwargs: Any) -> Any:
        if kwargs["now"] - kwargs["since"] > timedelta(days=7):
            self.blocking.inside += 1
            self.blocking.changed.set()
            await self.blocking.release.wait()
        return await self.read(session, **kwargs)


@pytest.fixture
async def app_with_two_costly_reads(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[FastAPI, LongSummaries]]:
    """The service with room for two costly reads, whose long summaries wait on a release."""
    reads = LongSummaries()
    monkeypatch.setattr(stock_reads, "summary", reads)
    application = create_app(settings.model_copy(update={"max_costly_reads_in_flight": 2}))
    async with started(application):
        yield application, reads


async def test_long_stock_windows_are_read_within_their_own_budget(
    app_with_two_costly_reads: tuple[FastAPI, LongSummaries],
) -> None:
    application, reads = app_with_two_costly_reads
    estimate = {
        "gpu_model": "B300",
        "gpu_count": 8,
        "providers": ["verda"],
        "max_price_per_hour": "45",
    }
    async with _client(application) as client, asyncio.timeout(20):
        ada, bob, cy = [await create_account(client, name) for name in ("Ada", "Bob", "Cy")]

        async def summary(account: AccountHandle, window: str) -> httpx.Response:
            path = f"/v1/stock/summary?window={window}"
            return await client.get(path, headers=account.headers)

        ada_long = asyncio.create_task(summary(ada, "30d"))
        await reads.blocking.until_inside(1)
        ada_second = await summary(ada, "90d")
        ada_estimate = await client.post(
            "/v1/stock/estimate", json={**estimate, "window": "30d"}, headers=ada.headers
        )
        ada_short = await summary(ada, "7d")  # the control: not a costly read
        bob_long = asyncio.create_task(summary(bob, "8d"))
        await reads.blocking.until_inside(2)
        cy_long = await summary(cy, "30d")
        cy_short = await client.post(
            "/v1/stock/estimate", json={**estimate, "window": "36h"}, headers=cy.headers
        )
        reads.blocking.release.set()
        answered = await asyncio.gather(ada_long, bob_long)
        cy_after = await summary(cy, "30d")
        metrics = await client.get("/metrics")
    assert [r.status_code for r in answered] == [200, 200]
    for refused in (ada_second, ada_estimate, cy_long):
        assert refused.status_code == 503, refused.text
        assert refused.headers["Retry-After"] == "1"
        assert refused.json()["error"]["code"] == "overloaded"
    assert "one is yours already" in ada_second.json()["error"]["message"]
    assert "2 are being read" in cy_long.json()["error"]["message"]
    assert (ada_short.status_code, cy_short.status_code) == (200, 200)
    assert cy_after.status_code == 200  # the places are given back
    assert 'autoprovision_requests_shed_total{bound="costly"}' in metrics.text
