"""Which of an order's providers this service can deploy on, as credentials come and go."""

from decimal import Decimal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.states import OrderEventKind
from app.services import accounts, orders, placing, timeline
from app.services.order_request import NewAlternative, NewOrder
from app.services.timeline import Line
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Order, OrderEvent

ALL = {"verda", "hyperstack", "quantacloud"}


async def _place(engine: AsyncEngine, *providers: str) -> str:
    request = NewOrder((NewAlternative("B300", 8, providers, max_price_per_hour=Decimal(45)),))
    async with session_scope(create_sessionmaker(engine)) as session:
        account, _key = await accounts.create_account(session, name="orders")
        return (
            await placing.place_order(
                session, account_id=account.id, request=request, enabled=ALL, max_waiting=100
            )
        ).id


async def _note(engine: AsyncEngine, *enabled: str) -> int:
    async with session_scope(create_sessionmaker(engine)) as session:
        return await orders.note_disabled_providers(session, enabled=set(enabled))


async def _lines(engine: AsyncEngine, order_id: str) -> list[str]:
    async with session_scope(create_sessionmaker(engine)) as session:
        found = await session.scalars(
            select(OrderEvent.message)
            .where(
                OrderEvent.order_id == order_id,
                OrderEvent.kind == OrderEventKind.PROVIDERS_DISABLED,
            )
            .order_by(OrderEvent.id)
        )
        return list(found)


async def _disabled(engine: AsyncEngine, order_id: str) -> list[str] | None:
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await session.get(Order, order_id)
        assert order is not None
        return order.disabled_providers


async def test_credentials_removed_later_are_told_once_per_change(engine: AsyncEngine) -> None:
    stranded = await _place(engine, "hyperstack")
    narrowed = await _place(engine, "verda", "hyperstack")
    untouched = await _place(engine, "verda")

    assert await _note(engine, "verda") == 2
    assert await _lines(engine, stranded) == [
        "Hyperstack: not available on this service (no credentials configured); "
        "this order cannot deploy anywhere until they are."
    ]
    assert await _lines(engine, narrowed) == [
        "Hyperstack: not available on this service (no credentials configured); "
        "this order can deploy only on Verda."
    ]
    assert await _lines(engine, untouched) == []
    assert await _disabled(engine, narrowed) == ["hyperstack"]

    assert await _note(engine, "verda") == 0  # the same situation again: nothing new
    assert len(await _lines(engine, stranded)) == 1

    assert await _note(engine, *ALL) == 2  # the credentials are back
    assert (await _lines(engine, stranded))[
        -1
    ] == "Hyperstack: all available on this service again."
    assert await _disabled(engine, stranded) is None


async def test_only_waiting_orders_are_looked_at(engine: AsyncEngine) -> None:
    done = await _place(engine, "hyperstack")
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await session.get_one(Order, done)
        await orders.cancel_order(session, account_id=order.account_id, order_id=done)
    waiting = await _place(engine, "hyperstack")  # control: the same order, still waiting
    assert await _note(engine, "verda") == 1
    assert await _lines(engine, done) == []
    assert len(await _lines(engine, waiting)) == 1


async def test_every_event_kind_can_be_stored(engine: AsyncEngine) -> None:
    # The database checks event kinds (migrations 0009, 0010): a kind without a migration fails.
    order_id = await _place(engine, "verda")
    async with session_scope(create_sessionmaker(engine)) as session:
        await timeline.write(session, *(Line(order_id, kind, str(kind)) for kind in OrderEventKind))
    async with session_scope(create_sessionmaker(engine)) as session:
        stored = set(await session.scalars(select(OrderEvent.kind)))
    assert stored == set(OrderEventKind)


async def test_waiting_shapes_are_each_alternative_of_each_waiting_order(
    engine: AsyncEngine,
) -> None:
    b300 = NewAlternative("B300", 8, ["verda"], max_price_per_hour=Decimal(45))
    h200 = NewAlternative("H200", 8, ["verda"], max_price_per_hour=Decimal(30))
    pair = NewAlternative("H100", 1, ["hyperstack"], max_price_per_hour=Decimal(6), nodes=2)
    gone = NewAlternative("A100-80G", 8, ["verda"], max_price_per_hour=Decimal(9))
    async with session_scope(create_sessionmaker(engine)) as session:
        account, _key = await accounts.create_account(session, name="shapes")
        placed = [
            await placing.place_order(
                session, account_id=account.id, request=NewOrder(shapes), enabled=ALL,
                max_waiting=100,
            )
            for shapes in ((b300,), (h200, pair), (gone,))
        ]  # fmt: skip
        await orders.cancel_order(session, account_id=account.id, order_id=placed[-1].id)
    async with session_scope(create_sessionmaker(engine)) as session:
        shapes = await orders.waiting_shapes(session)
    wanted = sorted(
        (s["gpu_model"], s["nodes"], tuple(s["providers"]), Decimal(s["max_price_per_hour"]))
        for s in shapes
    )
    assert wanted == [  # the cancelled order's A100 is not among them
        ("B300", 1, ("verda",), Decimal(45)),
        ("H100", 2, ("hyperstack",), Decimal(6)),
        ("H200", 1, ("verda",), Decimal(30)),
    ]
