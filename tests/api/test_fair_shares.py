"""One client's flood of slow requests against the service as `autoprovision serve` runs it:
the flood's excess is its own `503`s, and another account's requests are answered."""

import asyncio
import contextlib
import secrets
import threading
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI

from app.api.connections import guarded_protocol
from app.api.deps import CurrentAccount
from app.main import create_app
from app.settings import Settings
from tests.servers import serve_in_thread
from tests.waiting import eventually_sync

ADMIN = {"Authorization": "Bearer test-admin-key-0123456789"}
FLOOD_LOOPS = 20
ROUNDS = 5  # requests each flooding loop sends, one after another
OTHER_REQUESTS = 37
sqlite_only = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


class SlowReads:
    """What the test routes wait on: each request that enters waits until `release`."""

    def __init__(self) -> None:
        self.entered = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._open = asyncio.Event()

    async def wait(self) -> None:
        """Called by a route, on the server's loop."""
        self._loop = asyncio.get_running_loop()
        self.entered += 1
        await self._open.wait()

    def release(self) -> None:
        """From the test's thread: let every waiting request, and all later ones, through."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._open.set)


class Flood:
    """FLOOD_LOOPS threads, each sending ROUNDS GETs of one URL one after another from one
    loopback address, on a kept-alive connection; with `headers`, or (None) a key of its own
    for every request: the share such a flood counts against must not be one per made-up key."""

    def __init__(self, url: str, source: str, headers: dict[str, str] | None = None) -> None:
        self.statuses: list[int] = []
        self.finished = 0
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._loop, args=(url, source, headers), daemon=True)
            for _ in range(FLOOD_LOOPS)
        ]
        for thread in self._threads:
            thread.start()

    def _loop(self, url: str, source: str, headers: dict[str, str] | None) -> None:
        transport = httpx.HTTPTransport(local_address=source)
        with httpx.Client(transport=transport, timeout=30) as client:
            for _ in range(ROUNDS):
                made_up = {"Authorization": f"Bearer {secrets.token_urlsafe(24)}"}
                sent = made_up if headers is None else headers
                status = client.get(url, headers=sent).status_code
                with self._lock:
                    self.statuses.append(status)
        with self._lock:
            self.finished += 1

    def join(self) -> None:
        for thread in self._threads:
            thread.join(timeout=30)
        assert self.finished == FLOOD_LOOPS


@contextlib.contextmanager
def served(settings: Settings, slow: SlowReads) -> Iterator[str]:
    """The service on the connection protocol `serve` uses, with two slow test routes: a read
    that needs an account's key, and one that needs none."""
    application: FastAPI = create_app(settings)

    @application.get("/test/slow")
    async def slow_read(_account: CurrentAccount) -> dict[str, str]:
        await slow.wait()
        return {"status": "done"}

    @application.get("/test/slow-open")
    async def slow_open_read() -> dict[str, str]:
        await slow.wait()
        return {"status": "done"}

    protocol = guarded_protocol(
        head_timeout_seconds=settings.request_timeout_seconds,
        max_per_client=settings.max_connections_per_client,
    )
    with serve_in_thread(application, lifespan="on", http=protocol) as url:
        yield url


def _account(url: str, name: str) -> dict[str, str]:
    """A new account's headers, its key used once so the service has seen it."""
    made = httpx.post(url + "/v1/accounts", json={"name": name}, headers=ADMIN)
    assert made.status_code == 201, made.text
    headers = {"Authorization": f"Bearer {made.json()['api_key']}"}
    assert httpx.get(url + "/v1/account", headers=headers).status_code == 200
    return headers


@sqlite_only
def test_one_key_flooding_slow_reads_leaves_another_account_answered(settings: Settings) -> None:
    slow = SlowReads()
    with served(settings.model_copy(update={"max_requests_in_flight": 16}), slow) as url:
        flooder, other = _account(url, "Flood"), _account(url, "Other")
        flood = Flood(url + "/test/slow", "127.0.0.1", flooder)
        try:
            # Each loop either waits inside the route or has had all its rounds answered.
            eventually_sync(lambda: slow.entered + flood.finished == FLOOD_LOOPS)
            held = slow.entered
            answers = [
                httpx.get(url + "/v1/orders", headers=other).status_code
                for _ in range(OTHER_REQUESTS)
            ]
        finally:
            slow.release()
            flood.join()
    assert answers.count(503) == 0
    assert answers == [200] * OTHER_REQUESTS
    # A client alone may use the spare room, never the part kept for the others.
    assert held == 16 - settings.max_requests_in_flight_per_client
    # The control: the flood's requests past that were refused, each of them.
    assert flood.statuses.count(503) == (FLOOD_LOOPS - held) * ROUNDS
    assert flood.statuses.count(200) == held * ROUNDS


@sqlite_only
@pytest.mark.parametrize("key", ["none", "a new one each time"])
def test_a_flood_without_a_known_key_is_one_address_share(settings: Settings, key: str) -> None:
    slow = SlowReads()
    with served(settings.model_copy(update={"max_requests_in_flight": 16}), slow) as url:
        other = _account(url, "Other")
        headers: dict[str, str] | None = {} if key == "none" else None
        flood = Flood(url + "/test/slow-open", "127.0.0.2", headers)
        try:
            eventually_sync(lambda: slow.entered + flood.finished == FLOOD_LOOPS)
            held = slow.entered
            answers = [
                httpx.get(url + "/v1/orders", headers=other).status_code
                for _ in range(OTHER_REQUESTS)
            ]
            elsewhere = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.3"))
            with elsewhere:
                catalogue = elsewhere.get(url + "/v1/catalogue").status_code
        finally:
            slow.release()
            flood.join()
    assert answers == [200] * OTHER_REQUESTS
    assert catalogue == 200  # another address without a key has a share of its own
    assert held == 16 - settings.max_requests_in_flight_per_client
    assert flood.statuses.count(503) == (FLOOD_LOOPS - held) * ROUNDS  # the control
