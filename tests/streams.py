"""Read an event stream in the background of a test, and wait for what it has received."""

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from tests.waiting import eventually


class Received:
    """The events a stream has delivered so far (their JSON, in order) and how it ended."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.status_code: int | None = None
        self.ended = asyncio.Event()

    @property
    def ids(self) -> list[int]:
        """The ids received, in order."""
        return [event["id"] for event in self.events]

    async def until(
        self, check: Callable[[list[dict[str, Any]]], bool], seconds: float = 10.0
    ) -> list[dict[str, Any]]:
        """Wait until `check(events)` holds; the events then."""

        async def holds() -> list[dict[str, Any]] | None:
            return list(self.events) if check(self.events) else None

        return await eventually(holds, seconds=seconds)


@asynccontextmanager
async def streaming(
    base_url: str, api_key: str, *, last_event_id: int | None = None
) -> AsyncIterator[Received]:
    """Hold `GET /v1/events/stream` open for the block; what arrived is in the yielded object.

    Returns once the response's headers are in, so an event written after that is delivered.
    """
    received = Received()
    headers = {"Authorization": f"Bearer {api_key}"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    opened = asyncio.Event()

    async def read() -> None:
        try:
            async with (
                httpx.AsyncClient(base_url=base_url, timeout=30) as client,
                aconnect_sse(client, "GET", "/v1/events/stream", headers=headers) as source,
            ):
                received.status_code = source.response.status_code
                opened.set()
                async for sse in source.aiter_sse():
                    if not sse.data:  # a heartbeat comment (httpx-sse yields those as empty)
                        continue
                    event = json.loads(sse.data)
                    assert sse.id == str(event["id"]) and sse.event == event["type"], sse
                    received.events.append(event)
        finally:
            opened.set()
            received.ended.set()

    task = asyncio.create_task(read())
    try:
        await asyncio.wait_for(opened.wait(), 10)
        yield received
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
