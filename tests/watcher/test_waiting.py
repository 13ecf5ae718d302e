"""The in-memory book of waiting orders: read in full once, then only what changed."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.schemas import OrderCreate
from app.core.market import MachineKey, OrderWants
from app.services import accounts, ledger, orders
from app.storage.db import create_read_sessionmaker, create_sessionmaker, session_scope
from app.watcher.waiting import WaitingBook


async def _refresh(book: WaitingBook, engine: AsyncEngine) -> None:
    async with session_scope(create_read_sessionmaker(engine)) as session:
        await book.refresh(session)


async def _place(engine: AsyncEngine, account_id: str, **overrides: object) -> str:
    body = {"gpu_model": "B300", "gpu_count": 8, "providers": ["verda"], "max_price_per_hour": 50}
    request = OrderCreate.model_validate(body | overrides).new_order()
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await orders.place_order(
            session,
            account_id=account_id,
            request=request,
            enabled=request.providers,
            max_waiting=100,
        )
        return order.id


async def test_the_book_follows_places_cancels_and_balances(engine: AsyncEngine) -> None:
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        account, _key = await accounts.create_account(session, name="book")
        await ledger.credit(session, account_id=account.id, amount=Decimal(100))
    first = await _place(engine, account.id)
    book = WaitingBook()
    await _refresh(book, engine)  # the full read
    assert list(book.orders) == [first]
    assert book.funds[account.id] == Decimal(100)
    assert book.providers == {"verda"}

    second = await _place(engine, account.id, providers=["hyperstack"], gpu_count=4)
    async with session_scope(maker) as session:
        await orders.cancel_order(session, account_id=account.id, order_id=first)
        await ledger.credit(session, account_id=account.id, amount=Decimal("0.50"))
    await _refresh(book, engine)  # only what changed
    assert list(book.orders) == [second]
    assert book.providers == {"hyperstack"}
    assert book.funds[account.id] == Decimal("100.50")
    assert [o.id for o in book.candidates({MachineKey("B300", 4)})] == [second]
    assert book.candidates({MachineKey("B300", 8)}) == []


async def test_candidates_come_oldest_first_across_machines(engine: AsyncEngine) -> None:
    async with session_scope(create_sessionmaker(engine)) as session:
        account, _key = await accounts.create_account(session, name="book")
    placed = [await _place(engine, account.id, gpu_count=count) for count in (8, 4, 8, 4)]
    book = WaitingBook()
    await _refresh(book, engine)
    both = book.candidates({MachineKey("B300", 8), MachineKey("B300", 4)})
    assert [o.id for o in both] == placed
    book.discard(placed[0])
    assert [o.id for o in book.candidates({MachineKey("B300", 8)})] == [placed[2]]


def test_orders_are_grouped_by_machine_with_its_nodes() -> None:
    made = datetime(2026, 12, 3, tzinfo=UTC)
    single = OrderWants("ord_1", made, frozenset({"verda"}), "B200", 8, Decimal(50))
    cluster = replace(single, id="ord_2", created_at=made + timedelta(seconds=1), nodes=2)
    book = WaitingBook()
    book.add((single,))
    book.add((cluster,))
    assert book.machines_for("verda") == {MachineKey("B200", 8), MachineKey("B200", 8, 2)}
    assert book.candidates({MachineKey("B200", 8)}) == [single]
    assert book.candidates({MachineKey("B200", 8, 2)}) == [cluster]
    book.discard(cluster.id)
    assert book.candidates({MachineKey("B200", 8, 2)}) == []
    assert book.candidates({MachineKey("B200", 8)}) == [single]
