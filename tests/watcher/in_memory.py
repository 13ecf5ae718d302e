"""A watcher in memory, for tests of its rules: not started (no loops run), on this test's
database, a FakeAdapter for the provider and a FakeClock; the test hands it each stock read
as a poll would. Nothing sleeps."""

import asyncio
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.clock import utcnow
from app.core.states import OrderStatus
from app.providers.base import Offer
from app.providers.fake import FakeAdapter
from app.settings import Settings
from app.storage.db import create_read_sessionmaker, create_sessionmaker, session_scope
from app.storage.models import Order
from app.watcher.watcher import STALE_AFTER_PERIODS, Watcher
from tests.clock import FakeClock
from tests.factories import waiting_orders

COOLDOWN = 5.0
PRICE = Decimal("20.00")
D0 = Decimal(0)
# No fees: the orders `waiting_orders` places accept exactly the offer's own price.
SETTINGS = {"capacity_cooldown_seconds": COOLDOWN, "fee_percent": D0, "fee_flat_per_hour": D0}


class OnFakeAdapter:
    """A watcher (not started) on this test's database and a FakeAdapter, with `update` to the
    settings, on a FakeClock, and on `wall_clock` for the time of day."""

    def __init__(
        self,
        engine: AsyncEngine,
        settings: Settings,
        update: dict[str, Any],
        wall_clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.engine = engine
        self.fake = FakeAdapter()
        self.clock = FakeClock()
        self.watcher = Watcher(
            settings=settings.model_copy(update=update),
            adapters={self.fake.provider: self.fake},
            sessionmaker=create_sessionmaker(engine),
            read_sessionmaker=create_read_sessionmaker(engine),
            clock=self.clock,
            wall_clock=wall_clock,
        )


class InMemory(OnFakeAdapter):
    """The watcher without fees, its offer at PRICE, orders for it placed by the test."""

    def __init__(
        self, engine: AsyncEngine, settings: Settings, wall_clock: Callable[[], datetime] = utcnow
    ) -> None:
        super().__init__(engine, settings, SETTINGS, wall_clock)
        self.offer = self.fake.offer(price=PRICE)
        self.max_age = self.watcher.periods[self.fake.provider] * STALE_AFTER_PERIODS

    async def order(self) -> str:
        (order_id,) = await waiting_orders(engine=self.engine, offer=self.offer, credit=100)
        await self.watcher.refresh_waiting()
        return order_id

    async def poll(self, *offers: Offer) -> None:
        """One stock read that starts and lands now, then the creates it sent, answered."""
        await self.watcher.on_offers(self.fake.provider, list(offers), self.clock())
        await self.settle()

    async def settle(self) -> None:
        """Wait for the creates in flight (the fake answers at once) and the notes being
        written, then re-read the orders."""
        await asyncio.gather(*self.watcher.deployer.in_flight)
        await self.watcher.notes_written()
        await self.watcher.refresh_waiting()

    async def status(self, order_id: str) -> OrderStatus:
        async with session_scope(create_sessionmaker(self.engine)) as session:
            order = await session.get(Order, order_id)
            assert order is not None
            return order.status
