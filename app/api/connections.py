"""The HTTP server's bounds on connections, below the application: a deadline for a request's
head and a cap on one client address's open connections.

uvicorn waits for a request's head without end (its keep-alive timeout starts only after a
first response), so a client can hold any number of connections by sending nothing, or a
header a byte at a time. This is uvicorn's httptools protocol with those two bounds, and with
a way for the application to drop a connection outright (`ABORT_EXTENSION` in the scope) when
its client does not read the response.
"""

import asyncio
import logging
from collections import Counter
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.api.limits import ABORT_EXTENSION
from app.support.metrics import SLOW_CLIENTS_DROPPED

logger = logging.getLogger(__name__)


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a head deadline and a per-address connection cap.

    Subclasses made by `guarded_protocol` set the two bounds and own the count of open
    connections by address (one per server).
    """

    head_timeout_seconds: float = 10.0
    max_per_client: int = 64
    open_by_client: Counter[str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._counted: str | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        address = self.client[0] if self.client else None
        if address is not None:
            self.open_by_client[address] += 1
            self._counted = address
            if self.open_by_client[address] > self.max_per_client:
                SLOW_CLIENTS_DROPPED.labels(phase="connections").inc()
                if self.open_by_client[address] == self.max_per_client + 1:
                    logger.info(
                        "%s has %d connections open; refusing more until some close",
                        address,
                        self.max_per_client,
                    )
                transport.abort()
                return
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        if self._counted is not None:
            self.open_by_client[self._counted] -= 1
            if self.open_by_client[self._counted] <= 0:
                del self.open_by_client[self._counted]
            self._counted = None
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["extensions"] = {ABORT_EXTENSION: self._abort}  # type: ignore[dict-item]
        self._arm_head_deadline()

    def on_headers_complete(self) -> None:
        self._disarm_head_deadline()
        super().on_headers_complete()

    def _arm_head_deadline(self) -> None:
        self._disarm_head_deadline()
        self._head_deadline = self.loop.call_later(self.head_timeout_seconds, self._head_too_slow)

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if not self.transport.is_closing():
            SLOW_CLIENTS_DROPPED.labels(phase="head").inc()
            logger.info(
                "%s sent no complete request head within %g s; connection closed",
                self.client[0] if self.client else "a client",
                self.head_timeout_seconds,
            )
            self.transport.abort()

    def _abort(self) -> None:
        # Marked first, so the server does not report the request's unfinished response as an
        # application error: the connection is gone, and that is all there is to say.
        if self.cycle is not None:
            self.cycle.disconnected = True
        self.transport.abort()


def guarded_protocol(
    *, head_timeout_seconds: float, max_per_client: int
) -> type[GuardedHttpToolsProtocol]:
    """The protocol class for one server, with its bounds and its own connection count."""
    return type(
        "ServiceHttpProtocol",
        (GuardedHttpToolsProtocol,),
        {
            "head_timeout_seconds": head_timeout_seconds,
            "max_per_client": max_per_client,
            "open_by_client": Counter(),
        },
    )
