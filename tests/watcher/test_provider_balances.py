"""Our account at a provider must cover one hour before an order is claimed there: in memory,
a FakeAdapter's balance and the test handing the watcher each stock read."""

import logging
from decimal import Decimal

import pytest
from sqlalchemy import select

from app.core.states import OrderEventKind, OrderStatus
from app.providers.base import Unavailable
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import OrderEvent
from app.watcher.watcher import NOTES_EVERY_SECONDS
from tests.factories import waiting_orders
from tests.watcher.in_memory import PRICE, InMemory


async def place(memory: InMemory, count: int = 1) -> list[str]:
    ids = await waiting_orders(engine=memory.engine, offer=memory.offer, count=count, credit=1000)
    await memory.watcher.refresh_waiting()
    return ids


async def poll(memory: InMemory, available: int = 1) -> None:
    """One stock read, its creates answered, and the balance reads their outcomes started."""
    memory.clock.advance(NOTES_EVERY_SECONDS)  # the "why still waiting" notes are due
    offer = memory.fake.offer(price=PRICE, available=available)
    await memory.poll(offer)
    await memory.watcher.balances.reads_done()


def short(memory: InMemory, balance: str) -> str:
    machine = f"{memory.offer.gpu_count}x {memory.offer.gpu_model}"
    return (
        f"Fake account balance ${balance} does not cover one hour of {machine} ($20.00); waiting."
    )


async def lines(memory: InMemory, order_id: str) -> list[str]:
    async with session_scope(create_sessionmaker(memory.engine)) as session:
        found = await session.scalars(
            select(OrderEvent.message)
            .where(
                OrderEvent.order_id == order_id,
                OrderEvent.kind == OrderEventKind.PROVIDER_FUNDS,
            )
            .order_by(OrderEvent.id)
        )
        return list(found)


async def test_an_account_that_cannot_pay_one_hour_is_not_claimed_and_says_why(
    memory: InMemory,
) -> None:
    (order_id,) = await place(memory)
    memory.fake.account_balance = Decimal("12.40")
    await memory.watcher.balances.read_all()
    await poll(memory)
    await poll(memory)  # the same situation again: told once
    assert await memory.status(order_id) == OrderStatus.WAITING
    assert memory.fake.calls["create_vm"] == 0
    assert await lines(memory, order_id) == [short(memory, "12.40")]
    # Control: the same order once the account can pay.
    memory.fake.account_balance = Decimal("20.00")
    await memory.watcher.balances.read_all()
    await poll(memory)
    assert await memory.status(order_id) == OrderStatus.DEPLOYED


async def test_several_creates_in_one_pass_spend_the_balance_down(memory: InMemory) -> None:
    ids = await place(memory, count=3)
    memory.fake.account_balance = Decimal("50.00")  # two hours of $20, not three
    await memory.watcher.balances.read_all()
    reads = memory.fake.calls["balance"]
    await poll(memory, available=3)
    statuses = [await memory.status(i) for i in ids]
    assert statuses == [OrderStatus.DEPLOYED, OrderStatus.DEPLOYED, OrderStatus.WAITING]
    assert memory.fake.calls["create_vm"] == 2
    # Within the pass, the first two creates' hours were taken off before the third was looked at.
    assert await lines(memory, ids[2]) == [short(memory, "10.00")]
    assert memory.fake.calls["balance"] > reads  # the creates' outcomes started a fresh read
    # After the outcomes, the balance is what the provider says again.
    memory.fake.account_balance = Decimal("19.99")
    await memory.watcher.balances.read_all()
    await poll(memory)
    assert await memory.status(ids[2]) == OrderStatus.WAITING
    memory.fake.account_balance = Decimal("20.00")
    await memory.watcher.balances.read_all()
    await poll(memory)
    assert await memory.status(ids[2]) == OrderStatus.DEPLOYED


async def test_a_balance_that_cannot_be_read_blocks_nothing(
    memory: InMemory, caplog: pytest.LogCaptureFixture
) -> None:
    (order_id,) = await place(memory)
    memory.fake.account_balance = Decimal("0")  # would block, were it readable
    memory.fake.balance_error = Unavailable(memory.fake.provider, "HTTP 503")
    with caplog.at_level(logging.WARNING, logger="app.watcher.balances"):
        await memory.watcher.balances.read_all()
        await memory.watcher.balances.read_all()
    assert memory.watcher.balances.headroom() == {}
    warned = [r for r in caplog.records if "cannot be read" in r.getMessage()]
    assert len(warned) == 1  # logged once per change, not once per read
    await poll(memory)
    assert await memory.status(order_id) == OrderStatus.DEPLOYED
    assert await lines(memory, order_id) == []
