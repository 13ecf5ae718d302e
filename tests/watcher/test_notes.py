"""Why an order keeps waiting, told once per situation: in memory, the test handing the watcher
each stock read."""

from dataclasses import replace
from decimal import Decimal

import pytest
from sqlalchemy import select, update

from app.core.states import OrderEventKind, OrderStatus
from app.services.claims import vm_tag
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Order, OrderEvent
from app.watcher import watcher as watcher_module
from app.watcher.watcher import NOTES_EVERY_SECONDS
from tests.factories import waiting_orders
from tests.watcher.in_memory import PRICE, InMemory


async def above_max_lines(memory: InMemory) -> dict[str, int]:
    async with session_scope(create_sessionmaker(memory.engine)) as session:
        found = await session.scalars(
            select(OrderEvent.order_id).where(OrderEvent.kind == OrderEventKind.ABOVE_MAX)
        )
        counted: dict[str, int] = {}
        for order_id in found:
            counted[order_id] = counted.get(order_id, 0) + 1
        return counted


async def test_more_notes_than_one_write_takes_are_all_written_once(
    memory: InMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watcher_module, "MAX_NOTES_PER_WRITE", 2)
    ids = await waiting_orders(engine=memory.engine, offer=memory.offer, count=5, credit=1000)
    await memory.watcher.refresh_waiting()
    dearer = memory.fake.offer(price=PRICE + 1)  # above every order's max: five near misses
    for _ in range(4):
        memory.clock.advance(NOTES_EVERY_SECONDS)
        await memory.poll(dearer)
    told = await above_max_lines(memory)
    assert told == dict.fromkeys(ids, 1)  # two a turn: all five by the third
    # The same situation again: nothing more is written.
    memory.clock.advance(NOTES_EVERY_SECONDS)
    await memory.poll(dearer)
    assert await above_max_lines(memory) == told


async def test_an_order_whose_total_its_first_hour_would_pass_is_told_and_takes_nothing(
    memory: InMemory,
) -> None:
    limited, unlimited = await waiting_orders(
        engine=memory.engine, offer=memory.offer, count=2, credit=1000
    )
    # A limit below the offer's hour, as an order keeps it when a create it was raised for
    # made no machine (placing and PATCH refuse it on a waiting order).
    async with session_scope(create_sessionmaker(memory.engine)) as session:
        await session.execute(
            update(Order).where(Order.id == limited).values(max_total_usd=PRICE - Decimal(1))
        )
    await memory.watcher.refresh_waiting()
    memory.clock.advance(NOTES_EVERY_SECONDS)
    await memory.poll(replace(memory.offer, available=2))  # one unit each
    assert [c.tag for c in memory.fake.creates] == [vm_tag(unlimited)]  # control: it was there
    assert await memory.status(limited) is OrderStatus.WAITING
    async with session_scope(create_sessionmaker(memory.engine)) as session:
        (line,) = await session.scalars(
            select(OrderEvent.message).where(
                OrderEvent.order_id == limited, OrderEvent.kind == OrderEventKind.ABOVE_MAX
            )
        )
    assert "$20.00/h" in line and "max_total_usd of $19.00" in line, line
