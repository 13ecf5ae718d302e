"""The watcher's time rules, in memory: a FakeAdapter for the provider and a clock the test
moves, with the test handing it each stock read as a poll would. Nothing sleeps."""

import asyncio
from collections.abc import AsyncIterator
from decimal import Decimal

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.states import OrderStatus
from app.providers import fake, registry
from app.providers.base import NoCapacity, Offer
from app.providers.fake import Create, FakeAdapter
from app.settings import Settings
from app.storage.db import create_read_sessionmaker, create_sessionmaker, session_scope
from app.storage.models import Order
from app.watcher.watcher import STALE_AFTER_PERIODS, Watcher
from tests.clock import TICK, FakeClock
from tests.factories import waiting_orders

COOLDOWN = 5.0
PRICE = Decimal("20.00")
D0 = Decimal(0)
# No fees: the orders `waiting_orders` places accept exactly the offer's own price.
SETTINGS = {"capacity_cooldown_seconds": COOLDOWN, "fee_percent": D0, "fee_flat_per_hour": D0}


class InMemory:
    """A watcher (not started: no loops run) on this test's database and a FakeAdapter."""

    def __init__(self, engine: AsyncEngine, settings: Settings) -> None:
        self.engine = engine
        self.fake = FakeAdapter()
        self.clock = FakeClock()
        self.offer = self.fake.offer(price=PRICE)
        self.watcher = Watcher(
            settings=settings.model_copy(update=SETTINGS),
            adapters={self.fake.provider: self.fake},
            sessionmaker=create_sessionmaker(engine),
            read_sessionmaker=create_read_sessionmaker(engine),
            clock=self.clock,
        )
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
        """Wait for the creates in flight (the fake answers at once), then re-read the orders."""
        await asyncio.gather(*self.watcher.deployer.in_flight)
        await self.watcher.refresh_waiting()

    async def status(self, order_id: str) -> OrderStatus:
        async with session_scope(create_sessionmaker(self.engine)) as session:
            order = await session.get(Order, order_id)
            assert order is not None
            return order.status


@pytest.fixture
async def memory(engine: AsyncEngine, settings: Settings) -> AsyncIterator[InMemory]:
    with registry.offering(fake.SPEC):
        yield InMemory(engine, settings)


async def test_an_offer_that_answered_no_capacity_is_skipped_until_its_cooldown_passes(
    memory: InMemory,
) -> None:
    order_id = await memory.order()
    memory.fake.queue(Create.fails(NoCapacity))
    await memory.poll(memory.offer)
    assert await memory.status(order_id) == OrderStatus.WAITING
    assert len(memory.fake.creates) == 1

    memory.clock.advance(COOLDOWN - TICK)
    await memory.poll(memory.offer)  # a fresh read, but the offer still cools
    assert len(memory.fake.creates) == 1
    assert await memory.status(order_id) == OrderStatus.WAITING

    memory.clock.advance(TICK)
    await memory.poll(memory.offer)
    assert len(memory.fake.creates) == 2
    assert await memory.status(order_id) == OrderStatus.DEPLOYED


@pytest.mark.parametrize(("age", "acted_on"), [(0.0, True), (1.0, True), (1.0 + TICK, False)])
async def test_a_deploy_pass_acts_on_a_read_only_while_it_is_fresh(
    memory: InMemory, age: float, acted_on: bool
) -> None:
    """`age` in units of the maximum age (three poll periods)."""
    await memory.poll(memory.offer)  # read before any order waits: nothing to do yet
    memory.clock.advance(age * memory.max_age)
    order_id = await memory.order()
    await memory.watcher.deploy_pass()  # as a pass started by something other than a read
    await memory.settle()
    assert len(memory.fake.creates) == int(acted_on)
    expected = OrderStatus.DEPLOYED if acted_on else OrderStatus.WAITING
    assert await memory.status(order_id) == expected
