"""Limits on requests: bodies larger than any valid request, and more requests than one
process can answer in good time.

FastAPI's own `max_body_size` answers some of these with a plain-text body, and uvicorn's
`--limit-concurrency` counts idle keep-alive connections too and answers in plain text; these
keep every 413 and 503 in the service's JSON error shape.
"""

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import OVERLOADED_CODE, RETRY_AFTER_SECONDS, error_response
from app.metrics import REQUESTS_SHED

MAX_BODY_BYTES = 64 * 1024
# Probes and scrapes answer under overload too: a replica that is busy is still alive and
# ready, and its metrics are what shows the overload.
# Event streams stay open for hours; they have their own cap (per account).
UNLIMITED_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/v1/events/stream"})


class BodySizeLimit:
    """ASGI middleware: 413 for a declared or streamed body over `max_bytes`."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        message = f"request body is larger than {self.max_bytes // 1024} KiB"
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await error_response(413, "payload_too_large", message)(scope, receive, send)
            return
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            incoming = await receive()
            if incoming["type"] == "http.request":
                seen += len(incoming.get("body", b""))
                if seen > self.max_bytes:
                    # FastAPI re-raises HTTPExceptions from body reading; anything else
                    # would become a generic 400.
                    raise HTTPException(413, message)
            return incoming

        await self.app(scope, limited_receive, send)


class InFlightLimit:
    """ASGI middleware: at most `limit` requests at once; past it an immediate 503.

    One process answers on one core, which a handful of requests already keep busy: more
    only wait longer, for the CPU and for a database connection (in no fair order). Each
    also takes a turn on the event loop between every two steps of the others, so SQLite's
    one writer, whose transaction spans a dozen steps, slows with every reader let in.
    Refusing the excess at once, with Retry-After, lets clients back off or go elsewhere.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNLIMITED_PATHS:
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            REQUESTS_SHED.inc()
            message = f"too many requests at once; retry in {RETRY_AFTER_SECONDS} s"
            headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
            await error_response(503, OVERLOADED_CODE, message, headers=headers)(
                scope, receive, send
            )
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
