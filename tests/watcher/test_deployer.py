"""The deployer against a provider that answers as told: no HTTP, no simulator."""

from collections import deque
from collections.abc import Collection
from decimal import Decimal

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Provider
from app.core.states import AttemptStatus, LedgerKind, OrderEventKind, OrderStatus
from app.providers.base import (
    VM,
    Images,
    MachineKey,
    Offer,
    ProviderError,
    Refused,
    Rejected,
    VMState,
    Volume,
)
from app.providers.budget import Budget, StockRead
from app.services import attempts
from app.storage.db import create_read_sessionmaker, create_sessionmaker, session_scope
from app.storage.models import Account, Attempt, LedgerEntry, Order, OrderEvent
from app.watcher.book import OfferBook
from app.watcher.context import WatcherContext
from app.watcher.deployer import Deployer
from app.watcher.match import Assignment
from tests.clock import FakeClock
from tests.factories import waiting_orders

OFFER = Offer(Provider("hyperstack"), "CANADA-1", "n3-L40Sx1", "L40S", 1, Decimal("1.10"))


class AnswersWith:
    """A provider whose every create answers with the same VM."""

    provider = Provider("hyperstack")
    budget = Budget(())

    def __init__(self, vm_id: str) -> None:
        self.vm_id = vm_id
        self.creates = 0

    def stock_reads(self, machines: Collection[MachineKey]) -> list[StockRead]:
        return []

    async def create_vm(self, offer: Offer, **_details: object) -> VM:
        self.creates += 1
        return VM(self.provider, self.vm_id, VMState.PENDING, "BUILD")

    async def find_vms(self, **_query: object) -> list[VM]:
        raise AssertionError("not looked up here")

    async def fetch_offers(self, machines: Collection[MachineKey] | None = None) -> list[Offer]:
        return []

    def stock_forecasts(self) -> None:
        return None

    async def get_vm(self, vm_id: str) -> VM | None:
        return None

    async def list_vms(self) -> list[VM]:
        return []

    async def delete_vm(self, vm_id: str) -> None:
        return None

    async def balance(self) -> Decimal:
        return Decimal(0)

    async def images(self) -> Images:
        return Images()

    async def delete_startup_script(self, name: str) -> None:
        return None

    async def list_startup_scripts(self) -> list[str]:
        return []

    async def list_volumes(self) -> list[Volume]:
        return []

    async def delete_volume(self, volume_id: str) -> None:
        return None


class AnswersInTurn(AnswersWith):
    """A provider whose creates answer in turn: each a refusal raised, or a VM of that id."""

    def __init__(self, *answers: ProviderError | str) -> None:
        super().__init__("")
        self.answers = deque(answers)

    async def create_vm(self, offer: Offer, **_details: object) -> VM:
        self.creates += 1
        answer = self.answers.popleft()
        if isinstance(answer, ProviderError):
            raise answer
        return VM(self.provider, answer, VMState.PENDING, "BUILD")


def _deployer(engine: AsyncEngine, adapter: AnswersWith, book: OfferBook) -> Deployer:
    return Deployer(
        WatcherContext(
            adapters={Provider("hyperstack"): adapter},
            sessionmaker=create_sessionmaker(engine),
            read_sessionmaker=create_read_sessionmaker(engine),
        ),
        book=book,
        on_settled=lambda: None,
        pause_provider=lambda _provider, _seconds: None,
    )


async def test_a_create_answered_with_a_vm_another_order_owns_is_looked_up_not_recorded(
    engine: AsyncEngine,
) -> None:
    owner, late = await waiting_orders(engine, OFFER, 2)
    adapter = AnswersWith("vm-1")
    book = OfferBook(cooldown_seconds=0)
    deployer = _deployer(engine, adapter, book)
    for order_id in (owner, late):
        (intent,), _gone = await deployer.claim([Assignment(order_id, OFFER, Decimal("1.10"))])
        await deployer.send(intent, book.take(OFFER.key))

    assert adapter.creates == 2
    async with session_scope(create_sessionmaker(engine)) as session:
        rows = {
            d.order_id: (d.status, d.provider_vm_id, d.detail or "")
            for d in (await session.execute(select(Attempt))).scalars()
        }
        statuses = dict((await session.execute(select(Order.id, Order.status))).all())
        debits = await session.scalar(
            select(func.count())
            .select_from(LedgerEntry)
            .where(LedgerEntry.kind == LedgerKind.DEBIT)
        )
    assert rows[owner][:2] == (AttemptStatus.DEPLOYED, "vm-1")
    assert rows[late][:2] == (AttemptStatus.UNKNOWN, None)  # looked up like an unclear one
    assert "vm-1" in rows[late][2] and "another order already owns" in rows[late][2]
    assert statuses == {owner: OrderStatus.DEPLOYED, late: OrderStatus.DEPLOYING}
    assert debits == 1  # one VM, one debit


async def test_a_create_answered_with_its_own_vm_is_recorded(engine: AsyncEngine) -> None:
    """Positive control: the same path with a VM no one owns deploys the order."""
    (order_id,) = await waiting_orders(engine, OFFER)
    adapter = AnswersWith("vm-2")
    book = OfferBook(cooldown_seconds=0)
    deployer = _deployer(engine, adapter, book)
    (intent,), _gone = await deployer.claim([Assignment(order_id, OFFER, Decimal("1.10"))])
    await deployer.send(intent, book.take(OFFER.key))
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await session.get(Order, order_id)
        assert order is not None and order.status == OrderStatus.DEPLOYED
        recorded = await attempts.attempts_in(session, statuses=(AttemptStatus.DEPLOYED,))
    assert [d.provider_vm_id for d in recorded] == ["vm-2"]


def unexplained(said: str = "Quota exceeded for this project") -> Refused:
    """A refusal Hyperstack does not explain (the adapter found no field of ours in it)."""
    return Refused(
        OFFER.provider, "create refused", status_code=400, reason="bad_request", said=said
    )


async def send_one(deployer: Deployer, order_id: str) -> None:
    (intent,), _gone = await deployer.claim([Assignment(order_id, OFFER, Decimal("1.10"))])
    await deployer.send(intent, deployer.book.take(OFFER.key))


async def seen(engine: AsyncEngine, order_id: str) -> tuple[OrderStatus, Decimal, list[str]]:
    """The order's status, what its account has held, and its timeline's refused lines."""
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await session.get(Order, order_id)
        assert order is not None
        account = await session.get(Account, order.account_id)
        assert account is not None
        lines = await session.scalars(
            select(OrderEvent.message)
            .where(OrderEvent.order_id == order_id, OrderEvent.kind == OrderEventKind.REFUSED)
            .order_by(OrderEvent.id)
        )
        return order.status, account.held, list(lines)


def rests(seconds: str) -> str:
    return (
        "Hyperstack refused the create (400, 'bad_request', 'Quota exceeded for this project') "
        f"without saying what in the request was wrong: keeps waiting; this offer rests {seconds}."
    )


async def test_an_unexplained_refusal_keeps_the_order_waiting_and_says_what_was_answered(
    engine: AsyncEngine,
) -> None:
    (order_id,) = await waiting_orders(engine, OFFER)
    clock = FakeClock()
    book = OfferBook(cooldown_seconds=5.0, clock=clock)
    deployer = _deployer(engine, AnswersInTurn(unexplained()), book)
    await send_one(deployer, order_id)
    assert await seen(engine, order_id) == (OrderStatus.WAITING, Decimal(0), [rests("5 s")])
    assert book.cooling() == {OFFER.key}
    async with session_scope(create_sessionmaker(engine)) as session:
        (attempt,) = (await session.scalars(select(Attempt))).all()
    assert attempt.status == AttemptStatus.NOT_CREATED


async def test_what_the_provider_said_is_quoted_safely_and_cut_short(engine: AsyncEngine) -> None:
    (order_id,) = await waiting_orders(engine, OFFER)
    said = "Denied\u202e\n" + "x" * 1000
    deployer = _deployer(engine, AnswersInTurn(unexplained(said)), OfferBook(cooldown_seconds=5))
    await send_one(deployer, order_id)
    (_status, _held, (line,)) = await seen(engine, order_id)
    assert "'Denied\\u202e\\u000a" + "x" * 142 + "...'" in line  # 150 characters quoted
    assert "\u202e" not in line and "\n" not in line and len(line) < 400


async def test_refusals_in_a_row_rest_the_offer_longer_until_a_create_there_is_accepted(
    engine: AsyncEngine,
) -> None:
    first, second = await waiting_orders(engine, OFFER, 2)
    clock = FakeClock()
    book = OfferBook(cooldown_seconds=5.0, clock=clock)
    adapter = AnswersInTurn(unexplained(), unexplained(), "vm-1", unexplained())
    deployer = _deployer(engine, adapter, book)
    await send_one(deployer, first)
    clock.advance(5.0)
    assert book.cooling() == frozenset()
    await send_one(deployer, first)
    clock.advance(10.0 - 2.0**-20)
    assert book.cooling() == {OFFER.key}  # the second refusal in a row rests twice as long
    clock.advance(2.0**-20)
    await send_one(deployer, first)  # accepted
    await send_one(deployer, second)
    assert await seen(engine, first) == (
        OrderStatus.DEPLOYED, Decimal(0), [rests("5 s"), rests("10 s")]
    )  # fmt: skip
    assert await seen(engine, second) == (OrderStatus.WAITING, Decimal(0), [rests("5 s")])


async def test_a_refusal_that_names_the_request_itself_still_fails_the_order(
    engine: AsyncEngine,
) -> None:
    """The control: `Rejected` (a field of ours named) fails the order, and rests nothing."""
    (order_id,) = await waiting_orders(engine, OFFER)
    named = Rejected(OFFER.provider, "400 bad_request naming image_name", status_code=400)
    book = OfferBook(cooldown_seconds=5.0, clock=FakeClock())
    await send_one(_deployer(engine, AnswersInTurn(named), book), order_id)
    assert await seen(engine, order_id) == (OrderStatus.FAILED, Decimal(0), [])
    assert book.cooling() == frozenset()
