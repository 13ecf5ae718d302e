"""Slow and greedy clients against the service as `autoprovision serve` runs it: stalled bodies,
stalled heads, unread responses and one address's many connections leave it answering."""

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Response
from prometheus_client.parser import text_string_to_metric_families

from app.api.connections import guarded_protocol
from app.main import create_app
from app.settings import Settings
from tests.servers import serve_in_thread
from tests.waiting import eventually_sync

ADMIN = {"Authorization": "Bearer test-admin-key-0123456789"}
LARGE_BYTES = 4 * 1024 * 1024
sqlite_only = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


class Served:
    """The running service: its address, and how many times the large test route was entered."""

    def __init__(self, url: str, large_entered: list[int]) -> None:
        self.url = url
        self.port = int(url.rsplit(":", 1)[1])
        self.large_entered = large_entered

    def get(self, path: str, timeout: float = 10.0) -> httpx.Response:
        """A GET from 127.0.0.1, on a new connection."""
        return httpx.get(self.url + path, timeout=timeout)

    def connect(self, source: str) -> socket.socket:
        """A raw connection from `source`, a loopback address of the 127.0.0.0/8 block."""
        sock = socket.create_connection(
            ("127.0.0.1", self.port), timeout=10, source_address=(source, 0)
        )
        return sock

    def dropped(self, phase: str) -> float:
        """`autoprovision_slow_clients_dropped_total` for `phase`, from /metrics."""
        for family in text_string_to_metric_families(self.get("/metrics").text):
            for sample in family.samples:
                if (
                    sample.name == "autoprovision_slow_clients_dropped_total"
                    and sample.labels.get("phase") == phase
                ):
                    return sample.value
        return 0.0


@contextlib.contextmanager
def served(settings: Settings, **overrides: Any) -> Iterator[Served]:
    """The service with `overrides`, on the connection protocol `serve` uses, plus a test
    route with a 4 MiB answer; the background jobs and watcher off."""
    settings = settings.model_copy(update=overrides)
    application: FastAPI = create_app(settings)
    entered: list[int] = []

    @application.get("/test/large")
    async def large() -> Response:
        entered.append(1)
        return Response(b"x" * LARGE_BYTES, media_type="application/octet-stream")

    protocol = guarded_protocol(
        head_timeout_seconds=settings.request_timeout_seconds,
        max_per_client=settings.max_connections_per_client,
    )
    with serve_in_thread(application, lifespan="on", http=protocol) as url:
        yield Served(url, entered)


def _head(method: str, path: str, **headers: str) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        "Host: 127.0.0.1",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _stall_a_body(served: Served, source: str, api_key: str) -> socket.socket:
    """POST an order whose body says 1,000 bytes and sends one; returns once the application
    is reading the body (it asked for it: `100 Continue`)."""
    sock = served.connect(source)
    sock.sendall(
        _head(
            "POST",
            "/v1/orders",
            **{
                "Authorization": f"Bearer {api_key}",
                "Content-Type": "application/json",
                "Content-Length": "1000",
                "Expect": "100-continue",
            },
        )
    )
    assert sock.recv(64).startswith(b"HTTP/1.1 100 Continue")
    sock.sendall(b"{")
    return sock


def _read_answer(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of the one response on `sock`, read until the server closes."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed `sock` (reading at most what it had sent)."""
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def _account_key(served: Served) -> str:
    response = httpx.post(served.url + "/v1/accounts", json={"name": "Eve"}, headers=ADMIN)
    assert response.status_code == 201, response.text
    return str(response.json()["api_key"])


def test_sixteen_stalled_bodies_leave_the_api_answering_and_each_gets_a_408(
    settings: Settings,
) -> None:
    with served(settings, max_requests_in_flight=16, request_timeout_seconds=2.0) as service:
        key = _account_key(service)
        before = service.dropped("body")
        stalled = [_stall_a_body(service, "127.0.0.2", key) for _ in range(16)]
        try:
            probe = service.get("/v1/catalogue")
            orders = httpx.get(
                service.url + "/v1/orders", headers={"Authorization": f"Bearer {key}"}
            )
            answers = [_read_answer(sock) for sock in stalled]
        finally:
            for sock in stalled:
                sock.close()
        assert (probe.status_code, orders.status_code) == (200, 200)
        assert {status for status, _ in answers} == {408}
        assert {body["error"]["code"] for _, body in answers} == {"request_timeout"}
        assert service.dropped("body") - before == 16
        again = httpx.get(service.url + "/v1/orders", headers={"Authorization": f"Bearer {key}"})
        assert again.status_code == 200


@sqlite_only
def test_two_hundred_stalled_connections_leave_the_catalogue_answered_within_a_second(
    settings: Settings,
) -> None:
    with served(settings, request_timeout_seconds=30.0) as service:
        key = _account_key(service)
        assert service.get("/v1/catalogue").status_code == 200  # warm
        stalled: list[socket.socket] = []
        try:
            for n in range(100):  # bodies that never come, from four addresses
                stalled.append(_stall_a_body(service, f"127.0.0.{2 + n % 4}", key))
            for n in range(100):  # heads that never end, from four more
                sock = service.connect(f"127.0.0.{6 + n % 4}")
                sock.sendall(b"GET /v1/catalogue HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                stalled.append(sock)
            took = []
            for _ in range(5):
                started = time.monotonic()
                probe = service.get("/v1/catalogue", timeout=1.0)
                took.append(time.monotonic() - started)
                assert probe.status_code == 200
        finally:
            for sock in stalled:
                sock.close()
        assert max(took) < 1.0


@sqlite_only
def test_a_head_that_does_not_arrive_in_time_closes_its_connection(settings: Settings) -> None:
    with served(settings, request_timeout_seconds=0.5) as service:
        before = service.dropped("head")
        idle = service.connect("127.0.0.2")
        partial = service.connect("127.0.0.2")
        partial.sendall(b"GET /v1/catalogue HTTP/1.1\r\nHo")
        prompt = service.connect("127.0.0.2")
        prompt.sendall(_head("GET", "/v1/catalogue", Connection="close"))
        try:
            assert _read_answer(prompt)[0] == 200  # the control: a whole head in time
            assert _closed_by_server(idle)
            assert _closed_by_server(partial)
        finally:
            for sock in (idle, partial, prompt):
                sock.close()
        assert service.dropped("head") - before == 2


@sqlite_only
def test_a_client_that_does_not_read_frees_its_place_and_loses_its_connection(
    settings: Settings,
) -> None:
    with served(settings, max_requests_in_flight=1, response_timeout_seconds=0.5) as service:
        before = service.dropped("response")
        whole = httpx.get(service.url + "/test/large", timeout=10)
        assert len(whole.content) == LARGE_BYTES  # the control: a reader gets it all
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.settimeout(10)
        slow.connect(("127.0.0.1", service.port))
        try:
            # Two requests at once: the first answer fills every buffer, so the second one's
            # answer cannot be written at all while nobody reads.
            slow.sendall(_head("GET", "/test/large") * 2)
            eventually_sync(lambda: len(service.large_entered) == 3)
            probe = service.get("/v1/catalogue")
            eventually_sync(lambda: service.dropped("response") - before == 1)
            received = 0
            with contextlib.suppress(ConnectionResetError):
                while chunk := slow.recv(65536):
                    received += len(chunk)
        finally:
            slow.close()
        assert probe.status_code == 200
        assert received < 2 * LARGE_BYTES  # the connection was cut, not served


@sqlite_only
def test_one_address_holds_at_most_its_share_of_connections(settings: Settings) -> None:
    with served(settings, max_connections_per_client=5) as service:
        before = service.dropped("connections")
        held = [service.connect("127.0.0.3") for _ in range(8)]
        try:
            for sock in held:
                sock.settimeout(2)
            for sock in held:
                with contextlib.suppress(OSError):
                    sock.sendall(_head("GET", "/healthz"))
            answered, refused = 0, 0
            for sock in held:
                try:
                    answer = sock.recv(65536)
                except (ConnectionResetError, TimeoutError):
                    answer = b""
                if answer.startswith(b"HTTP/1.1 200"):
                    answered += 1
                else:
                    refused += 1
            probe = service.get("/v1/catalogue")  # another address is not affected
        finally:
            for sock in held:
                sock.close()
        assert (answered, refused) == (5, 3)
        assert probe.status_code == 200
        assert service.dropped("connections") - before == 3

        def reconnects() -> bool:
            with contextlib.closing(service.connect("127.0.0.3")) as sock:
                sock.sendall(_head("GET", "/healthz", Connection="close"))
                return sock.recv(64).startswith(b"HTTP/1.1 200")

        assert eventually_sync(reconnects)  # closed connections give their places back
