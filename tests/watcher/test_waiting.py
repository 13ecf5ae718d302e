"""The in-memory book of waiting orders: read in full once, then only what changed."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.order_schemas import OrderCreate
from app.core.catalogue import Provider
from app.core.market import Fees, MachineKey, OrderWants
from app.core.states import OrderStatus
from app.providers.base import Offer
from app.services import accounts, ledger, orders, placing
from app.storage.db import create_read_sessionmaker, create_sessionmaker, session_scope
from app.storage.models import Order
from app.watcher.match import assign, price_floors
from app.watcher.waiting import WaitingBook


async def _refresh(book: WaitingBook, engine: AsyncEngine) -> None:
    async with session_scope(create_read_sessionmaker(engine)) as session:
        await book.refresh(session)


async def _place(engine: AsyncEngine, account_id: str, **overrides: object) -> str:
    body = {"gpu_model": "B300", "gpu_count": 8, "providers": ["verda"], "max_price_per_hour": 50}
    request = OrderCreate.model_validate(body | overrides).new_order()
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await placing.place_order(
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


async def test_an_orders_spend_limit_is_read_and_ranks_it_by_what_its_first_hour_may_cost(
    engine: AsyncEngine,
) -> None:
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        account, _key = await accounts.create_account(session, name="book")
    order_id = await _place(engine, account.id)  # up to $50 an hour
    book = WaitingBook()
    await _refresh(book, engine)
    b300 = MachineKey("B300", 8)
    assert [o.id for o in book.candidates({b300}, at_least={b300: Decimal(50)})] == [order_id]
    # A limit below its cap, as an order keeps one when a create made no machine.
    async with session_scope(maker) as session:
        await session.execute(
            update(Order)
            .where(Order.id == order_id)
            .values(max_total_usd=Decimal(45), updated_at=datetime.now(UTC))
        )
    await _refresh(book, engine)  # what changed
    (wants,) = book.orders[order_id]
    assert (wants.max_total_usd, wants.first_hour_cap) == (Decimal(45), Decimal(45))
    assert book.candidates({b300}, at_least={b300: Decimal("45.01")}) == []
    assert [o.id for o in book.candidates({b300}, at_least={b300: Decimal(45)})] == [order_id]


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


def test_with_a_price_floor_only_orders_that_pay_that_much_come_oldest_first() -> None:
    made = datetime(2026, 12, 3, tzinfo=UTC)
    caps = [40, 55, 50, 60, 45]  # oldest first
    wants = [
        OrderWants(f"ord_{n}", made + timedelta(seconds=n), frozenset({"verda"}), "B300", 8, cap)
        for n, cap in enumerate(map(Decimal, caps))
    ]
    book = WaitingBook()
    for order in reversed(wants):
        book.add((order,))
    b300 = MachineKey("B300", 8)
    floor = {b300: Decimal(50)}
    assert [o.id for o in book.candidates({b300}, at_least=floor)] == ["ord_1", "ord_2", "ord_3"]
    assert book.candidates({b300}, at_least={b300: Decimal(61)}) == []
    assert [o.id for o in book.candidates({b300})] == [o.id for o in wants]  # no floor: all
    book.discard("ord_2")
    assert [o.id for o in book.candidates({b300}, at_least=floor)] == ["ord_1", "ord_3"]
    assert book.machines_for("verda") == {b300}
    for order in wants:
        book.discard(order.id)
    assert book.machines_for("verda") == frozenset()
    assert book.candidates({b300}, at_least=floor) == []


GPUS = st.sampled_from([("B300", 8), ("H200", 8), ("H100", 1)])
PROVIDERS = ["verda", "hyperstack"]


@st.composite
def markets(
    draw: st.DrawFn,
) -> tuple[list[tuple[OrderWants, ...]], list[Offer], dict[str, Decimal]]:
    """Waiting orders (some with two alternatives), offers, and the accounts' funds."""
    made = datetime(2026, 12, 3, tzinfo=UTC)
    prices = st.integers(min_value=1, max_value=12).map(lambda n: Decimal(n) * 5)
    placed = []
    for n in range(draw(st.integers(min_value=0, max_value=25))):
        shapes = draw(st.lists(GPUS, min_size=1, max_size=2, unique=True))
        listed = draw(st.booleans())
        created_at = made + timedelta(seconds=draw(st.integers(0, 30)))  # one for its shapes
        total = draw(st.none() | prices)  # its spend limit, shared by its shapes
        placed.append(
            tuple(
                OrderWants(
                    f"ord_{n:02}",
                    created_at,
                    frozenset(draw(st.lists(st.sampled_from(PROVIDERS), min_size=1, unique=True))),
                    model,
                    count,
                    draw(prices),
                    account_id=f"acc_{draw(st.integers(0, 3))}",
                    alternative=position,
                    prefer_listed=listed,
                    max_total_usd=total,
                )
                for position, (model, count) in enumerate(shapes, start=1)
            )
        )
    offers = []
    for n in range(draw(st.integers(min_value=0, max_value=6))):
        model, count = draw(GPUS)
        offers.append(
            Offer(
                provider=Provider(draw(st.sampled_from(PROVIDERS))),
                region="R1",
                sku=f"sku-{n}",
                gpu_model=model,
                gpu_count=count,
                price_per_hour=draw(prices),
                available=draw(st.integers(min_value=1, max_value=3)),
            )
        )
    funds = {f"acc_{n}": draw(prices) * 2 for n in range(4)}
    return placed, offers, funds


@settings(max_examples=300, deadline=None)
@given(markets())
def test_the_price_floor_changes_nothing_the_hot_path_decides(
    market: tuple[list[tuple[OrderWants, ...]], list[Offer], dict[str, Decimal]],
) -> None:
    placed, offers, funds = market
    book = WaitingBook()
    for alternatives in placed:
        book.add(alternatives)
    fees = Fees(percent=Decimal(10))
    floors = price_floors(offers, fees=fees)
    every = book.candidates({o.machine for o in offers})
    floored = book.candidates(floors, at_least=floors)

    def decided(candidates: list[OrderWants]) -> list[tuple[str, object, int]]:
        result = assign(candidates, offers, fees=fees, funds=funds, near_misses=False)
        return [(a.order_id, a.offer.key, a.alternative) for a in result.assignments]

    assert decided(floored) == decided(every)
    assert {o.id for o in floored} <= {o.id for o in every}
    # What the floor leaves out could not pay the cheapest offer for its machine (its price
    # cap, or its spend limit, is below it).
    for order in set(every) - set(floored):
        assert order.first_hour_cap < floors[order.machine]


async def test_the_check_of_everything_finds_what_the_reads_of_changes_missed(
    engine: AsyncEngine,
) -> None:
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        account, _key = await accounts.create_account(session, name="book")
        await ledger.credit(session, account_id=account.id, amount=Decimal(100))
    kept, repriced, cancelled = [await _place(engine, account.id) for _ in range(3)]
    book = WaitingBook()
    await _refresh(book, engine)  # the full read
    assert set(book.orders) == {kept, repriced, cancelled}

    # Two writes whose updated_at is older than the refresh's overlap: reads of what changed
    # since the last refresh cannot see them (a transaction that committed very late).
    long_ago = datetime(2026, 1, 1, tzinfo=UTC)
    async with session_scope(maker) as session:
        await session.execute(
            update(Order)
            .where(Order.id == repriced)
            .values(max_price_per_hour=Decimal(60), updated_at=long_ago)
        )
        await session.execute(
            update(Order)
            .where(Order.id == cancelled)
            .values(status=OrderStatus.CANCELLED, updated_at=long_ago)
        )
    await _refresh(book, engine)
    assert set(book.orders) == {kept, repriced, cancelled}  # missed, as expected
    assert book.orders[repriced][0].max_price_per_hour == Decimal(50)

    book._full_read_at = 0.0  # the safety net is due
    await _refresh(book, engine)
    assert set(book.orders) == {kept, repriced}
    assert book.orders[repriced][0].max_price_per_hour == Decimal(60)
    b300 = MachineKey("B300", 8)
    assert [o.id for o in book.candidates({b300}, at_least={b300: Decimal(55)})] == [repriced]
    assert book.funds[account.id] == Decimal(100)
