"""Fault injection: the faults queued through the control API, and what each does to a call."""

import asyncio
import random
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

from app.simulators.exchanges import mark_shaped_by_fault

FAULT_KINDS = (
    "http_500",
    "http_429",
    "timeout",
    "malformed_json",
    "create_delay",
    "create_error_after_commit",
    "capacity_race",
    "fail_after_accept",
    "unknown_status",
    "delete_refused",
    "delete_delay",
    "create_refused",
)
# These hit the next n calls, whatever they are; the others hit creates, VM reads or deletes
# (`delete_refused`: the provider refuses the delete as it does while a VM still boots;
# `delete_delay`: it takes the delete, then answers `seconds` later; `create_refused`: the
# next create gets a 4xx refusal of the test's choosing in the provider's own envelope).
REQUEST_FAULTS = ("http_500", "http_429", "timeout", "malformed_json")


# Refusals a drawn `create_refused` picks from (status, error code, message).
DRAWN_REFUSALS = (
    (400, "invalid_request", "Instance type is not available in this location"),
    (403, "forbidden_action", "Project quota exceeded"),
    (409, "conflict", "Resource is busy, try again"),
)


def draw_fault_arguments(rng: random.Random, kind: str) -> dict[str, Any]:
    """Arguments for a fault of `kind` drawn from `rng` that every simulator's control API
    takes: the chaos run's faults."""
    arguments: dict[str, Any] = {"count": rng.randint(1, 4)}
    if kind in ("timeout", "create_delay", "delete_delay"):
        arguments["seconds"] = round(rng.uniform(0.5, 4.0), 1)
    if kind == "create_refused":
        status, reason, message = rng.choice(DRAWN_REFUSALS)
        arguments.update(status=status, reason=reason, message=message)
    return arguments


@dataclass
class Fault:
    """A fault waiting to hit the next `count` matching calls."""

    kind: str
    count: int
    seconds: float
    status: int = 500  # the status of an `http_500` fault (any 5xx), or a `create_refused` (4xx)
    reason: str | None = None  # a `create_refused`'s error code (None: the envelope has none)
    message: str = ""  # a `create_refused`'s message


class ProviderAnswers(Protocol):
    """The provider's own answers that a request fault imitates."""

    def server_error_response(self, status: int = 500) -> Response:
        """The provider's 5xx."""

    def rate_limited_response(self, retry_after: float) -> Response:
        """The provider's 429."""

    def rate_limit_headers(self, request: Request) -> dict[str, str]:
        """What the provider reports is left of its limits on an answer to `request`."""


class FaultQueue:
    """The faults waiting to hit a simulator's next calls, oldest first."""

    def __init__(self) -> None:
        self._queued: list[Fault] = []

    def add(
        self,
        kind: str,
        count: int,
        seconds: float,
        status: int = 500,
        *,
        reason: str | None = None,
        message: str = "",
    ) -> None:
        """Queue a fault for the next `count` matching calls."""
        self._queued.append(Fault(kind, count, seconds, status, reason, message))

    def take(self, kind: str) -> Fault | None:
        """Use up one hit of the oldest queued fault of this kind, if any."""
        for fault in self._queued:
            if fault.kind == kind and fault.count > 0:
                fault.count -= 1
                if fault.count == 0:
                    self._queued.remove(fault)
                mark_shaped_by_fault()
                return fault
        return None

    async def delay(self, kind: str) -> None:
        """Wait out one hit of a queued fault of this kind (`create_delay`, `delete_delay`)."""
        fault = self.take(kind)
        if fault is not None:
            await asyncio.sleep(fault.seconds)

    async def request_fault(self, request: Request, answers: ProviderAnswers) -> Response | None:
        """Apply a queued request-level fault to this call: a response to send instead, or None.

        `timeout` only delays: the call then proceeds, so a client with a shorter timeout sees
        a timeout while the simulator still does the work (as a slow real API would).
        """
        for kind in REQUEST_FAULTS:
            fault = self.take(kind)
            if fault is None:
                continue
            if kind == "timeout":
                await asyncio.sleep(fault.seconds)
                return None
            if kind == "http_429":
                limited = answers.rate_limited_response(retry_after=fault.seconds or 1.0)
                # An injected 429 uses nothing up: what is left is reported as it really is (and
                # not at all on a call the provider does not count).
                reported = answers.rate_limit_headers(request)
                for name in ("RateLimit", "RateLimit-Policy"):
                    if name in reported:
                        limited.headers[name] = reported[name]
                    elif name in limited.headers:
                        del limited.headers[name]
                return limited
            if kind == "malformed_json":
                return Response(b'{"truncated": [1, 2', media_type="application/json")
            return answers.server_error_response(fault.status)
        return None
