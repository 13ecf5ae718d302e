"""The deployer against a provider that answers as told: no HTTP, no simulator."""

from collections.abc import Collection
from decimal import Decimal

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Provider
from app.core.states import AttemptStatus, LedgerKind, OrderStatus
from app.providers.base import VM, Images, MachineKey, Offer, VMState, Volume
from app.providers.budget import Budget, StockRead
from app.services import attempts
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Attempt, LedgerEntry, Order
from app.watcher.book import OfferBook
from app.watcher.deployer import Deployer
from app.watcher.match import Assignment
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


def _deployer(engine: AsyncEngine, adapter: AnswersWith, book: OfferBook) -> Deployer:
    return Deployer(
        adapters={Provider("hyperstack"): adapter},
        sessionmaker=create_sessionmaker(engine),
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
