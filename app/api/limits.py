"""Limits on requests: a body that is too large or too slow, a client that does not read its
answer, and more requests than one process can answer in good time.

FastAPI's own `max_body_size` answers some of these with a plain-text body, and uvicorn's
`--limit-concurrency` counts idle keep-alive connections too and answers in plain text; these
keep every 408, 413 and 503 in the service's JSON error shape. The connection-level bounds
(a request's head, connections per client address) are in `app.api.connections`.
"""

import asyncio
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import OVERLOADED_CODE, RETRY_AFTER_SECONDS, error_response
from app.api.shares import KnownKeys, Places
from app.core.errors import Overloaded
from app.support.metrics import REQUESTS_SHED, SLOW_CLIENTS_DROPPED

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
# Probes and scrapes answer under overload too: a replica that is busy is still alive and
# ready, and its metrics are what shows the overload.
# Event streams stay open for hours; they have their own cap (per account).
UNLIMITED_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/v1/events/stream"})
# A stream's slow reader is the stream's own business: it has its own send timeout.
STREAM_PATHS = frozenset({"/v1/events/stream"})
# The server's hook to drop a connection outright (see app.api.connections).
ABORT_EXTENSION = "autoprovision.abort"
CLOSE = {"Connection": "close"}


class BodyTooLarge(Exception):
    """The body is larger than the limit."""


class RequestBody:
    """ASGI middleware: the whole body is read, within `max_bytes` and `timeout_seconds`,
    before the application sees the request; 413 past the size, 408 past the deadline.

    Reading first is what keeps a client that sends its body slowly from holding a place in
    the in-flight bound (`InFlightLimit`, inside this one): it holds only its connection.
    """

    def __init__(
        self, app: ASGIApp, *, timeout_seconds: float, max_bytes: int = MAX_BODY_BYTES
    ) -> None:
        self.app = app
        self.timeout_seconds = timeout_seconds
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = f"request body is larger than {self.max_bytes // 1024} KiB"
        declared = dict(scope["headers"]).get(b"content-length")
        # A length of more digits than the limit has is over it (and int() of thousands of
        # digits raises).
        digits = declared.lstrip(b"0") if declared is not None else b""
        if digits.isdigit() and (
            len(digits) > len(str(self.max_bytes)) or int(digits) > self.max_bytes
        ):
            await error_response(413, "payload_too_large", too_large, headers=CLOSE)(
                scope, receive, send
            )
            return
        try:
            async with asyncio.timeout(self.timeout_seconds):
                first = await self._read(receive)
        except BodyTooLarge:
            await error_response(413, "payload_too_large", too_large, headers=CLOSE)(
                scope, receive, send
            )
            return
        except TimeoutError:
            SLOW_CLIENTS_DROPPED.labels(phase="body").inc()
            logger.info("%s sent its request body too slowly; answered 408", _client(scope))
            message = f"the request body did not arrive within {self.timeout_seconds:g} s"
            await error_response(408, "request_timeout", message, headers=CLOSE)(
                scope, _disconnected, send
            )
            return
        await self.app(scope, _replay(first, receive), send)

    async def _read(self, receive: Receive) -> Message:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return message  # a disconnect: the application sees it as it would have
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise BodyTooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}


def _replay(first: Message, receive: Receive) -> Receive:
    """A `receive` that gives the body already read, then whatever the connection says next."""
    pending: list[Message] = [first]

    async def replayed() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replayed


async def _disconnected() -> Message:
    return {"type": "http.disconnect"}


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "a client"


class SendDeadline:
    """ASGI middleware: a response that the client does not take within `timeout_seconds`
    (one write blocked that long) ends the request and drops its connection.

    Without it a client that never reads keeps its request, and its memory, for as long as
    it keeps the connection open.
    """

    def __init__(self, app: ASGIApp, *, timeout_seconds: float) -> None:
        self.app = app
        self.timeout_seconds = timeout_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in STREAM_PATHS:
            await self.app(scope, receive, send)
            return
        stalled = False

        async def send_in_time(message: Message) -> None:
            nonlocal stalled
            if stalled:
                raise ResponseStalled
            try:
                async with asyncio.timeout(self.timeout_seconds):
                    await send(message)
            except TimeoutError:
                stalled = True
                raise ResponseStalled from None

        try:
            await self.app(scope, receive, send_in_time)
        except ResponseStalled:
            SLOW_CLIENTS_DROPPED.labels(phase="response").inc()
            logger.info(
                "%s did not read its response within %g s; connection dropped",
                _client(scope),
                self.timeout_seconds,
            )
            abort: Callable[[], None] | None = scope.get("extensions", {}).get(ABORT_EXTENSION)
            if abort is not None:
                abort()


class ResponseStalled(Exception):
    """The client did not take the response in time."""


class InFlightLimit:
    """ASGI middleware: at most `limit` requests at once, and at most `per_client` of them
    from one client (its account, or its address: `app.api.shares`); past either an
    immediate 503.

    One process answers on one core, which a handful of requests already keep busy: more
    only wait longer, for the CPU and for a database connection (in no fair order). Each
    also takes a turn on the event loop between every two steps of the others, so SQLite's
    one writer, whose transaction spans a dozen steps, slows with every reader let in.
    Refusing the excess at once, with Retry-After, lets clients back off or go elsewhere; the
    share per client makes a flood's excess its own refusals, and leaves the other places to
    everyone else.

    A request counts only while the application works on it: its body is read before
    (`RequestBody`), and its place is given back when its response starts, so a client that
    is slow to send or to read holds none.
    """

    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        per_client: int | None = None,
        known_keys: KnownKeys | None = None,
    ) -> None:
        self.app = app
        self.places = Places(limit, per_client or limit)
        self.known_keys = known_keys if known_keys is not None else KnownKeys()
        self._refusing: set[str] = set()  # the shares refused since they last held nothing

    @property
    def in_flight(self) -> int:
        """Requests in flight now."""
        return self.places.held

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNLIMITED_PATHS:
            await self.app(scope, receive, send)
            return
        share = self.known_keys.share_of(scope)
        full = self.places.full_for(share)
        if full is not None:
            await self._refuse(share, full)(scope, receive, send)
            return
        self.places.take(share)
        counted = True

        def release() -> None:
            nonlocal counted
            if counted:
                counted = False
                self.places.give_back(share)
                if share not in self.places.by_share:
                    self._refusing.discard(share)

        async def send_and_release(message: Message) -> None:
            if message["type"] == "http.response.start":
                release()
            await send(message)

        try:
            await self.app(scope, receive, send_and_release)
        finally:
            release()

    def _refuse(self, share: str, full: str) -> ASGIApp:
        REQUESTS_SHED.labels(bound=full).inc()
        retry = f"retry in {RETRY_AFTER_SECONDS} s"
        if full == "client":
            holds = self.places.by_share[share]
            if share not in self._refusing:
                self._refusing.add(share)
                logger.info(
                    "%s has %d requests in flight, past its share; refusing more until one is "
                    "answered",
                    share,
                    holds,
                )
            message = (
                f"this client has {holds} requests in flight already, past its share of "
                f"{self.places.per_share} while the rest is kept for other clients; {retry}"
            )
        else:
            message = f"too many requests at once; {retry}"
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
        return error_response(503, OVERLOADED_CODE, message, headers=headers)


@contextmanager
def costly_read(places: Places, share: str, what: str) -> Iterator[None]:
    """Hold one of the costly reads' `places` for `share` while the block runs; `Overloaded`
    (503) when they are all held or the share holds its part. `what` says which reads count.

    Such a read holds its window's rows in memory and the CPU for long: a few at once are
    as much as one process gives them, whatever the in-flight bound leaves free.
    """
    full = places.full_for(share)
    if full is not None:
        REQUESTS_SHED.labels(bound="costly").inc()
        held = "one is yours already" if full == "client" else f"{places.limit} are being read"
        raise Overloaded(
            f"{what} are read {places.limit} at a time, one per account, and {held}; "
            f"retry in {RETRY_AFTER_SECONDS} s, or ask for a shorter window"
        )
    places.take(share)
    try:
        yield
    finally:
        places.give_back(share)
