"""The watcher's time rules, in memory: a FakeAdapter for the provider and a clock the test
moves, with the test handing it each stock read as a poll would. Nothing sleeps."""

import pytest

from app.core.states import OrderStatus
from app.providers.base import NoCapacity
from app.providers.fake import Create
from tests.clock import TICK
from tests.watcher.in_memory import COOLDOWN, InMemory


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
