"""Keep each provider's latest offers in the database, so every replica's API can show them."""

import dataclasses
import time
from decimal import Decimal
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.catalogue import Interconnect, Provider
from app.db import session_scope
from app.dbtypes import utcnow
from app.models import OfferSnapshot
from app.money import format_money
from app.providers.base import Offer
from app.watcher.book import OfferBook

HEARTBEAT_SECONDS = 5.0  # rewrite an unchanged snapshot this often, so its age stays honest


def offer_json(offer: Any) -> dict[str, Any]:
    """An Offer as stored JSON (money as strings)."""
    data = dataclasses.asdict(offer)
    data["provider"] = str(offer.provider)
    data["interconnect"] = str(offer.interconnect) if offer.interconnect else None
    data["price_per_hour"] = format_money(offer.price_per_hour)
    return data


def offer_from_json(data: dict[str, Any]) -> Offer:
    """The Offer a stored snapshot entry was made from."""
    return Offer(
        **{
            **data,
            "provider": Provider(data["provider"]),
            "interconnect": Interconnect(data["interconnect"]) if data["interconnect"] else None,
            "price_per_hour": Decimal(data["price_per_hour"]),
        }
    )


class SnapshotWriter:
    """Writes a provider's snapshot after a read, when it changed or has grown old."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], book: OfferBook) -> None:
        self.sessionmaker = sessionmaker
        self.book = book
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
            await session.merge(
                OfferSnapshot(
                    provider=str(provider),
                    offers=state[0],
                    fetched_at=read.read_at_wall,
                    checked_at=utcnow(),
                    error=read.error,
                )
            )
        self._last[provider] = (state, now)
