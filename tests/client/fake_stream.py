"""A stand-in for the service's event stream, served on loopback for `watch`'s tests.

It speaks the stream's contract: `GET /v1/events/stream` (Bearer key) sends Server-Sent Events,
each `id: <integer>`, `event: <type>`, `data: <json>` with the JSON `{id, type, kind, timestamp,
order_id, message, data}` (`data` the order as `GET /v1/orders/{id}` shows it); `Last-Event-ID`
resumes after that id; without it the stream starts with the next event; comment heartbeats.
`GET /v1/orders/{id}` answers the order as last published. The test publishes events from its
own thread and can drop a stream after some events or refuse the next connections.
"""

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

KEY = "ap_live_fake-stream-key"


def order_json(order_id: str, status: str, ip: str | None = None) -> dict[str, Any]:
    """An order as the API shows it, with a machine once it is past waiting."""
    deployment = None
    if status in ("deploying", "deployed", "running", "failed"):
        deployment = {
            "provider": "hyperstack", "region": "CANADA-1", "instance_type": "n3-H100x1",
            "provider_vm_id": "vm-1", "price_per_hour": "2.40",
            "price_per_hour_with_fees": "2.62", "ip": ip, "status": status,
            "created_at": "2026-12-01T10:00:00Z",
        }  # fmt: skip
    return {
        "id": order_id, "name": None, "status": status, "gpu_model": "H100", "gpu_count": 1,
        "providers": ["hyperstack"], "disabled_providers": [], "max_price_per_hour": "3.00",
        "regions": None, "min_disk_gb": None, "interconnect": None, "expires_at": None,
        "ssh_public_key": None, "created_at": "2026-12-01T09:59:00Z",
        "updated_at": "2026-12-01T10:00:00Z", "deployment": deployment,
    }  # fmt: skip


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


class FakeStream:
    """The stream's state: the account's events, the orders, and what the client asked."""

    def __init__(self, ping_seconds: float = 15) -> None:
        self.ping_seconds = ping_seconds
        self.events: list[dict[str, Any]] = []
        self.orders: dict[str, dict[str, Any]] = {}
        self.requests: list[str] = []  # "stream <Last-Event-ID or ->" and "order <id>", in order
        self.drop_after: int | None = None  # end each stream after sending this many events
        self.end_at_once = False  # end each stream right after its headers, with no event
        self.refuse: tuple[int, str] | None = None  # answer streams with this status and code
        self.on_order_read: Callable[[], object] | None = None  # runs as a GET is answered
        self._lock = threading.Lock()
        self._wakes: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def put_order(self, order: dict[str, Any]) -> None:
        """Set an order as `GET /v1/orders/{id}` answers it, without an event."""
        with self._lock:
            self.orders[order["id"]] = order

    def publish(self, kind: str, order: dict[str, Any] | None, message: str) -> int:
        """Append an event (`order.<kind>` with an order, else `account.<kind>`); its id."""
        with self._lock:
            event_id = len(self.events) + 1
            self.events.append(
                {
                    "id": event_id,
                    "type": f"{'order' if order else 'account'}.{kind}",
                    "kind": kind,
                    "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
                    "order_id": order["id"] if order else None,
                    "message": message,
                    "data": order,
                }
            )
            if order is not None:
                self.orders[order["id"]] = order
            wakes = list(self._wakes)
        for loop, wake in wakes:
            loop.call_soon_threadsafe(wake.set)
        return event_id

    def streams(self) -> list[str]:
        """The Last-Event-ID each stream connection came with (`-` for none)."""
        with self._lock:
            return [r.removeprefix("stream ") for r in self.requests if r.startswith("stream ")]

    async def _stream(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return _error(401, "unauthorized", "API key not recognised")
        last = request.headers.get("last-event-id")
        with self._lock:
            self.requests.append(f"stream {last or '-'}")
            refuse = self.refuse
            position = int(last) if last else len(self.events)
        if refuse is not None:
            return _error(refuse[0], refuse[1], f"refused by the test ({refuse[1]})")
        wake = asyncio.Event()
        entry = (asyncio.get_running_loop(), wake)
        with self._lock:
            self._wakes.append(entry)

        async def events() -> AsyncIterator[dict[str, str]]:
            nonlocal position
            sent = 0
            try:
                while not self.end_at_once:
                    wake.clear()
                    with self._lock:
                        pending = self.events[position:]
                    for event in pending:
                        yield {"id": str(event["id"]), "event": event["type"],
                               "data": json.dumps(event)}  # fmt: skip
                        position, sent = position + 1, sent + 1
                        if self.drop_after is not None and sent >= self.drop_after:
                            return
                    await wake.wait()
            finally:
                with self._lock:
                    self._wakes.remove(entry)

        return EventSourceResponse(events(), ping=self.ping_seconds)

    async def _order(self, request: Request) -> Response:
        order_id = request.path_params["order_id"]
        with self._lock:
            self.requests.append(f"order {order_id}")
        with self._lock:
            order = self.orders.get(order_id)
        if self.on_order_read is not None:  # the order changes after this answer was read
            self.on_order_read()
        if order is None:
            return _error(404, "not_found", f"order {order_id} not found")
        return JSONResponse(order)

    def app(self) -> Starlette:
        """The ASGI app to serve."""
        return Starlette(
            routes=[
                Route("/v1/events/stream", self._stream),
                Route("/v1/orders/{order_id}", self._order),
            ]
        )
