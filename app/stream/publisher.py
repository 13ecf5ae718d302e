"""Publishes new timeline lines to the event stream and wakes this process's streams.

Every replica runs one. Each round it publishes what is pending (on PostgreSQL, a replica
that finds another one publishing leaves it to that one), then looks for events newer than
the last it saw, whoever published them, and wakes the streams of their accounts. So an event
reaches a stream on any replica within about two polls.
"""

import asyncio
import contextlib
import logging

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.services import published_events
from app.storage.db import session_scope
from app.stream.hub import Hub

log = logging.getLogger(__name__)
POLL_SECONDS = 0.2


class Publisher:
    """The loop that publishes pending lines and wakes the streams that have news."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        read_sessionmaker: async_sessionmaker[AsyncSession],
        hub: Hub,
        *,
        poll_seconds: float = POLL_SECONDS,
        batch: int = published_events.PUBLISH_BATCH,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.read_sessionmaker = read_sessionmaker
        self.hub = hub
        self.poll_seconds = poll_seconds
        self.batch = batch
        self.position = 0  # the newest event id this process has woken streams for
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start from the newest event now, then poll."""
        async with self.read_sessionmaker() as session:
            self.position = await published_events.newest_id(session)
        self._task = asyncio.create_task(self._run(), name="event publisher")

    async def stop(self) -> None:
        """Stop polling (a round in progress is cancelled; what it did not commit stays)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def run_once(self) -> int:
        """One round: publish what is pending, then wake the streams with news; how many
        events this round published."""
        published = 0
        async with self.read_sessionmaker() as session:
            pending = await published_events.has_pending(session)
        while pending:
            async with session_scope(self.sessionmaker) as session:
                done = await published_events.publish_pending(session, limit=self.batch)
            published += done
            pending = done == self.batch
        async with self.read_sessionmaker() as session:
            news = await published_events.newest_by_account(session, after_id=self.position)
        if news:
            self.position = max(self.position, *news.values())
            self.hub.wake(news)
        return published

    async def _run(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception:
                log.exception("event publishing failed; trying again")
            await asyncio.sleep(self.poll_seconds)
