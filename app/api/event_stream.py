"""The event stream's response: a client that leaves, or reads nothing, is one info line."""

import logging

from sse_starlette import EventSourceResponse
from sse_starlette.sse import SendTimeoutError
from starlette.types import Receive, Scope, Send

logger = logging.getLogger(__name__)


class EventStream(EventSourceResponse):
    """An EventSourceResponse whose ends from the client's side are logged once, at info."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Stream until the client hangs up or stops reading; then run the background."""
        try:
            await super().__call__(scope, receive, send)
        except SendTimeoutError:
            # Raised past the background task, which lets the stream's listener go: run it here.
            logger.info("event stream dropped: the client took nothing for %g s", self.send_timeout)
            if self.background is not None:
                await self.background()
            return
        logger.info("event stream closed")
