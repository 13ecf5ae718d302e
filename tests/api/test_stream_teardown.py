"""An event stream that ends from the client's side is one info line in the log, not a flood."""

import asyncio
import logging
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sse_starlette import ServerSentEvent
from starlette.types import Message

from app.api.event_stream import EventStream
from app.main import create_app
from app.settings import Settings
from tests.servers import serve_in_thread
from tests.waiting import eventually_sync

ADMIN = {"Authorization": "Bearer test-admin-key-0123456789"}
STREAMS = 30


@pytest.fixture
def all_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every record at INFO or above, uvicorn's own too (they do not reach the root logger)."""
    caplog.set_level(logging.INFO)
    uvicorn_logger = logging.getLogger("uvicorn")
    uvicorn_logger.addHandler(caplog.handler)
    try:
        yield caplog
    finally:
        uvicorn_logger.removeHandler(caplog.handler)


def _open_and_drop(port: int, api_key: str) -> None:
    """Open a stream on a raw socket, read until its first heartbeat, then hang up."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        request = (
            f"GET /v1/events/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {api_key}\r\n\r\n"
        )
        sock.sendall(request.encode())
        seen = b""
        while b": heartbeat" not in seen:
            chunk = sock.recv(4096)
            assert chunk, f"the stream ended before its heartbeat: {seen!r}"
            seen += chunk
        assert seen.startswith(b"HTTP/1.1 200")


def _problems(records: list[logging.LogRecord]) -> list[str]:
    return [
        f"{r.name} {r.levelname}: {r.getMessage()[:200]}"
        for r in records
        if r.levelno >= logging.WARNING or r.exc_info is not None
    ]


def test_dropped_streams_are_one_info_line_each(
    settings: Settings, all_logs: pytest.LogCaptureFixture
) -> None:
    app = create_app(settings.model_copy(update={"stream_max_per_account": STREAMS}))
    with serve_in_thread(app, lifespan="on") as base_url:
        made = httpx.post(f"{base_url}/v1/accounts", json={"name": "Ada"}, headers=ADMIN)
        account = made.json()
        port = int(base_url.rsplit(":", 1)[1])
        for _ in range(STREAMS):
            _open_and_drop(port, account["api_key"])

        def all_closed() -> bool:
            closed = [r for r in all_logs.records if r.getMessage() == "event stream closed"]
            return app.state.hub.open_streams(account["id"]) == 0 and len(closed) >= STREAMS

        eventually_sync(all_closed, seconds=20)
    assert _problems(all_logs.records) == []
    closed = [r for r in all_logs.records if r.getMessage() == "event stream closed"]
    assert len(closed) == STREAMS  # the positive control: each disconnect is seen, once
    assert all(r.levelno == logging.INFO and r.exc_info is None for r in closed)


async def test_a_reader_that_takes_nothing_is_dropped_with_one_info_line(
    all_logs: pytest.LogCaptureFixture,
) -> None:
    ended = asyncio.Event()

    async def events() -> Any:
        try:
            while True:
                yield ServerSentEvent(data="x" * 100)
        finally:
            ended.set()

    async def receive() -> Message:
        await asyncio.Event().wait()  # the client never hangs up
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            await asyncio.Event().wait()  # and never reads: every body send stalls

    response = EventStream(events(), send_timeout=0.1, ping=0)
    scope = {"type": "http", "method": "GET", "headers": [], "path": "/"}
    await asyncio.wait_for(response(scope, receive, send), timeout=10)

    assert ended.is_set()
    assert _problems(all_logs.records) == []
    dropped = [r for r in all_logs.records if r.name == "app.api.event_stream"]
    assert [r.getMessage() for r in dropped] == [
        "event stream dropped: the client took nothing for 0.1 s"
    ]
