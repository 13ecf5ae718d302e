"""Refuse request bodies larger than any valid request, before they are read into memory.

FastAPI's own `max_body_size` answers some of these with a plain-text body; this keeps every
413 in the service's JSON error shape.
"""

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import error_response

MAX_BODY_BYTES = 64 * 1024


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
