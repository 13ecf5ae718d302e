"""`autoprovision watch`: follow the account's event stream (`GET /v1/events/stream`), all of it
or one order's, optionally until the order gets somewhere.

With an order and `--until`, the stream is connected first and the order read once its headers
are in, so nothing that happens in between is missed: the order as read settles it, or an
event after does. A dropped stream is connected again with `Last-Event-ID` (no gap, no repeat)
a few times with a growing pause, and then the command gives up (exit 3). Before the first
connection, there is nothing to resume: a failure is reported at once.
"""

import asyncio
import json
import sys
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from app.client.api import (
    ClientError,
    Exit,
    Target,
    answer_of,
    api_path,
    async_client,
    refusal,
    unreachable,
)
from app.client.render import (
    emit_json,
    entry_node,
    machine_got,
    nodes,
    order_ip,
    status_line,
    stream_line,
    usd,
)

STREAM_PATH = "/v1/events/stream"
# Heartbeats come every 15 s: a read that waits three of them out has lost the stream.
READ_TIMEOUT_SECONDS = 45.0
RECONNECT_PAUSES_SECONDS = (0.25, 0.5, 1.0, 2.0, 4.0)  # one pause per try, then give up
# A stream that stayed open this long was working: the reconnects count again from zero (so a
# proxy that cuts every stream after a minute never makes a quiet watch give up).
STABLE_SECONDS = 10.0
ENDED_BADLY = frozenset({"failed", "cancelled", "expired", "lost"})
ENDING = frozenset({"terminating", "terminated"})  # no machine is coming (any more)
# Event types `order.<status>` that name the status the order moved to.
STATUS_TYPES = frozenset({"deploying", "deployed", "running"}) | ENDED_BADLY | ENDING
# Event types that say what the machine reported of itself, and the stage each names.
STAGE_TYPES = {"order.ready": "ready", "order.not_ready": "failed"}


class Until(StrEnum):
    """How far the watched order must get for `watch --until` to exit 0."""

    DEPLOYED = "deployed"  # the provider accepted the create (running counts too)
    RUNNING = "running"  # the machine runs, with an IP
    READY = "ready"  # the machine reported its model answered (its stage, not a status)
    TERMINATED = "terminated"  # its machine was deleted and the order settled

    def reached_by(self, status: str) -> bool:
        """Whether an order in `status` has got this far (`ready` is the machine's stage)."""
        if self is Until.TERMINATED:
            return status == "terminated"
        if self is Until.READY:
            return False
        return status == "running" or (self is Until.DEPLOYED and status == "deployed")

    def missed_by(self, status: str) -> bool:
        """Whether an order in `status` will never get this far."""
        if self is Until.TERMINATED:
            return status in ENDED_BADLY
        return status in ENDED_BADLY | ENDING


class _Lost(Exception):
    """The stream is gone for a reason worth trying again."""

    def __init__(self, error: ClientError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass
class Watch:
    """One `watch` command: what to follow, how to print, and what has been seen so far."""

    target: Target
    order_id: str | None
    until: Until | None
    as_json: bool
    last_event_id: str | None = None
    order: dict[str, Any] | None = None
    connected: bool = False  # a stream was open once: from now on a drop is worth a retry
    tries: int = 0  # reconnects since the last event or stream that stayed open
    opened_at: float | None = None  # when the stream being read was opened (monotonic)

    async def run(self, timeout: float | None) -> Exit:
        """Follow the stream until the order settles it, or `timeout` seconds pass."""
        async with async_client(self.target, read_timeout=READ_TIMEOUT_SECONDS) as client:
            try:
                async with asyncio.timeout(timeout):
                    return await self._follow(client)
            except TimeoutError:
                if self.until is None:
                    return Exit.OK
                status = (self.order or {}).get("status", "unknown")
                raise ClientError(
                    f"{self.order_id} is still {status} after {timeout:g} s (--timeout); "
                    f"it did not get to {self.until}",
                    Exit.REFUSED,
                ) from None

    async def _follow(self, client: httpx.AsyncClient) -> Exit:
        while True:
            try:
                outcome = await self._read(client)
                if outcome is not None:
                    return outcome
                lost = ClientError("the service closed the event stream", Exit.UNREACHABLE)
            except _Lost as exc:
                lost = exc.error
            except httpx.TransportError as exc:
                if not self.connected:
                    raise unreachable(exc, self.target, retry_key=None) from None
                lost = unreachable(exc, self.target, retry_key=None)
            if self.opened_at is not None and time.monotonic() - self.opened_at >= STABLE_SECONDS:
                self.tries = 0
            if self.tries >= len(RECONNECT_PAUSES_SECONDS):
                raise ClientError(
                    f"lost the event stream: {lost}; gave up after {self.tries} reconnects",
                    Exit.UNREACHABLE,
                )
            await asyncio.sleep(RECONNECT_PAUSES_SECONDS[self.tries])
            self.tries += 1

    async def _read(self, client: httpx.AsyncClient) -> Exit | None:
        """Connect once and read until the stream ends (None) or the watch is settled."""
        first = not self.connected
        self.opened_at = None
        headers = {"Last-Event-ID": self.last_event_id} if self.last_event_id else {}
        async with aconnect_sse(client, "GET", STREAM_PATH, headers=headers) as source:
            response = source.response
            if response.status_code != 200:
                await response.aread()
                error = refusal(response, self.target)
                if response.status_code == 404 and first:
                    raise ClientError(
                        f"{self.target.shown} has no event stream ({STREAM_PATH} is not found): "
                        "is the service older than this client?",
                        Exit.BAD_INPUT,
                    )
                # Again after a drop, a 5xx or a 429 (our old stream not yet noticed closed)
                # passes; the first time, or any other refusal, is the answer.
                retry = error.exit_code is Exit.UNREACHABLE or response.status_code == 429
                if first or not retry:
                    raise error
                raise _Lost(error)
            if "text/event-stream" not in response.headers.get("content-type", ""):
                raise ClientError(
                    f"{self.target.shown}{STREAM_PATH} is not an event stream: is the service "
                    "new enough to have one?",
                    Exit.UNREACHABLE,
                )
            self.connected, self.opened_at = True, time.monotonic()
            # Read after the stream is open, so what changes after the read comes as an event;
            # again only when there is no event to resume after (else nothing was missed).
            if self.order_id is not None and (first or self.last_event_id is None):
                order = await self._get_order(client)
                outcome = self._settled(order)
                if outcome is not None:
                    return outcome
                if first and not self.as_json:  # never silent: where it stands, at once
                    sys.stdout.write(status_line(order) + "\n")
                    sys.stdout.flush()
            async for sse in source.aiter_sse():
                self.tries = 0
                if sse.id:
                    self.last_event_id = sse.id
                if not sse.data:
                    continue  # a heartbeat after an event comes back with its id and no data
                outcome = self._on_event(sse.data)
                if outcome is not None:
                    return outcome
        return None

    async def _get_order(self, client: httpx.AsyncClient) -> dict[str, Any]:
        assert self.order_id is not None
        response = await client.get(api_path("orders", self.order_id))
        order: dict[str, Any] = answer_of(response, self.target).body
        return order

    def _on_event(self, data: str) -> Exit | None:
        try:
            event = json.loads(data)
        except ValueError:
            return None  # not the stream's JSON: nothing to show or act on
        if not isinstance(event, dict):
            return None
        if self.order_id is not None and event.get("order_id") != self.order_id:
            return None
        if self.as_json:
            emit_json(event)
        else:
            sys.stdout.write(stream_line(event) + "\n")
            sys.stdout.flush()
        kind = str(event.get("type") or "")
        if self.order_id is None or not kind.startswith("order."):
            return None
        order = event.get("data")
        if isinstance(order, dict):
            self.order = {**(self.order or {}), **order}
        # The type says what this event is; `data` is the order as it was when the event was
        # published, which may be later (an `order.placed` whose order is cancelled by then):
        # its own event follows, so the lines printed and the outcome agree.
        if kind in STAGE_TYPES:
            return self._decide_stage(STAGE_TYPES[kind])
        status = kind.removeprefix("order.")
        return self._decide(status) if status in STATUS_TYPES else None

    def _settled(self, order: dict[str, Any]) -> Exit | None:
        """Keep the order as last seen; the exit code, if its status (or, for `ready`, its
        machine's stage) settles the watch."""
        self.order = {**(self.order or {}), **order}
        stage = (order.get("deployment") or {}).get("stage")
        if stage in STAGE_TYPES.values():
            decided = self._decide_stage(str(stage))
            if decided is not None:
                return decided
        return self._decide(str(order.get("status")))

    def _decide_stage(self, stage: str) -> Exit | None:
        """`--until ready`: the machine reported its model ready, or that it failed."""
        if self.until is not Until.READY:
            return None
        if stage == "ready":
            self._finish(f"{self.order_id} is ready: {self._ready_line()}")
            return Exit.OK
        self._finish(None)
        said = ((self.order or {}).get("deployment") or {}).get("stage_detail") or "no reason"
        raise ClientError(
            f"{self.order_id}'s machine reported it failed ({said}); it will not get to ready",
            Exit.REFUSED,
        )

    def _ready_line(self) -> str:
        order = self.order or {}
        got = machine_got(order.get("deployment"), entry=entry_node(order))
        tunnel = order.get("serve_tunnel")
        return f"{got}; reach it with {tunnel}" if tunnel else got

    def _decide(self, status: str) -> Exit | None:
        if self.until is None:
            return None
        if self.until.reached_by(status):
            self._finish(self._outcome(status))
            return Exit.OK
        if self.until.missed_by(status):
            self._finish(None)
            raise ClientError(
                f"{self.order_id} is {status}; it will not get to {self.until}", Exit.REFUSED
            )
        return None

    def _outcome(self, status: str) -> str:
        order = self.order or {}
        ip = order_ip(order)
        if status == "running" and ip:
            machine = machine_got({**order["deployment"], "ip": None})
            if nodes(order.get("deployment")) > 1:
                entry = entry_node(order)
                return f"{self.order_id} is running, its {entry} node at {ip} ({machine})"
            return f"{self.order_id} is running at {ip} ({machine})"
        if status == "terminated":
            return f"{self.order_id} is terminated: {usd(order.get('charged_usd'))} charged in all"
        got = machine_got(order.get("deployment"), entry=entry_node(order))
        return f"{self.order_id} is {status}: {got}"

    def _finish(self, line: str | None) -> None:
        """The last line: the order itself for scripts, the outcome for people."""
        if self.as_json:
            emit_json(self.order)
        elif line is not None:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
