"""Keep each provider's latest offers in the database, so every replica's API can show them."""

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.catalogue import Provider
from app.services import offers
from app.services.offers import offer_json
from app.storage.db import session_scope
from app.watcher.book import OfferBook

HEARTBEAT_SECONDS = 5.0  # rewrite an unchanged snapshot this often, so its age stays honest


class SnapshotWriter:
    """Writes a provider's snapshot after a read, when it changed or has grown old."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        book: OfferBook,
        remaining: Callable[[Provider], int | None] = lambda _provider: None,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.book = book
        self.remaining = remaining  # what is left of a provider's rate limits, written along
        self._last: dict[Provider, tuple[Any, float]] = {}

    async def maybe_write(self, provider: Provider) -> None:
        """Write the snapshot unless it is the same as the last one and still fresh."""
        read = self.book.reads.get(provider)
        if read is None:
            return
        state = ([offer_json(o) for o in read.offers], read.error)
        last = self._last.get(provider)
        now = time.monotonic()
        if last is not None and last[0] == state and now - last[1] < HEARTBEAT_SECONDS:
            return
        async with session_scope(self.sessionmaker) as session:
            await offers.keep_snapshot(
                session,
                provider=str(provider),
                offers=state[0],
                fetched_at=read.read_at_wall,
                error=read.error,
                rate_limit_remaining=self.remaining(provider),
            )
        self._last[provider] = (state, now)
