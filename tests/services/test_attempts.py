"""The deploy protocol's settles: one owner per VM, and the whole path from claim to running."""

from datetime import timedelta
from decimal import Decimal

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Provider
from app.core.states import AttemptStatus, LedgerKind, OrderEventKind, OrderStatus
from app.providers import fake, registry
from app.providers.base import (
    VM,
    AuthFailed,
    NoCapacity,
    Offer,
    ProviderAdapter,
    ProviderError,
    ProviderOutOfFunds,
    RateLimited,
    Refused,
    Rejected,
    Unavailable,
    VMState,
)
from app.providers.fake import Create, FakeAdapter
from app.services import accounts, attempts
from app.services import orders as orders_service
from app.services.attempts import VMAlreadyOwned
from app.storage.db import create_read_sessionmaker, create_sessionmaker, session_scope
from app.storage.models import Attempt, LedgerEntry, Order
from app.watcher.book import OfferBook
from app.watcher.context import WatcherContext
from app.watcher.deployer import Deployer
from app.watcher.follower import Follower
from app.watcher.match import Assignment
from tests.clock import FakeWallClock
from tests.factories import HYPER_L40S, QUANTA_L40S, claimed, order_status, waiting_orders


def _vm(vm_id: str, provider: Provider = Provider("hyperstack")) -> VM:
    return VM(provider, vm_id, VMState.PENDING, "BUILD")


async def test_a_vm_owned_by_one_attempt_is_refused_to_another(engine: AsyncEngine) -> None:
    one, two = await claimed(engine, HYPER_L40S, HYPER_L40S)
    second = two.order_id
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        assert await attempts.settle_created(session, attempt_id=one.attempt_id,
                                                vm=_vm("vm-1"))  # fmt: skip
    async with session_scope(maker) as session:
        with pytest.raises(VMAlreadyOwned):
            await attempts.settle_created(session, attempt_id=two.attempt_id, vm=_vm("vm-1"))
        # The refusal leaves the unit of work usable: nothing of it was written.
        attempt = await session.get(Attempt, two.attempt_id, populate_existing=True)
        assert attempt is not None and attempt.status == AttemptStatus.CREATING
    assert await order_status(engine, second) == OrderStatus.DEPLOYING
    async with session_scope(maker) as session:
        debits = await session.scalar(
            select(func.count())
            .select_from(LedgerEntry)
            .where(LedgerEntry.order_id == second, LedgerEntry.kind == LedgerKind.DEBIT)
        )
    assert debits == 0
    # Positive control: the same attempt records a VM of its own.
    async with session_scope(maker) as session:
        assert await attempts.settle_created(session, attempt_id=two.attempt_id, vm=_vm("vm-2"))
    assert await order_status(engine, second) == OrderStatus.DEPLOYED


async def test_the_same_vm_id_at_another_provider_is_another_vm(
    engine: AsyncEngine,
) -> None:
    one, two = await claimed(engine, HYPER_L40S, QUANTA_L40S)
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        await attempts.settle_created(session, attempt_id=one.attempt_id, vm=_vm("42"))
    async with session_scope(maker) as session:  # the same id at another provider
        assert await attempts.settle_created(
            session, attempt_id=two.attempt_id, vm=_vm("42", Provider("quantacloud"))
        )


# --- the whole deploy path in memory: claim -> create -> outcome -> follow -> running ---------


class DeployPath:
    """The deployer and the follower on this test's database, against a FakeAdapter: every
    step is a call the test makes, so nothing waits on a clock or the network."""

    def __init__(self, engine: AsyncEngine, fake: FakeAdapter) -> None:
        self.engine, self.fake = engine, fake
        self.book = OfferBook(cooldown_seconds=60)
        self.paused: list[float] = []
        adapters: dict[Provider, ProviderAdapter] = {fake.provider: fake}
        self.deployer = Deployer(
            WatcherContext(
                adapters=adapters,
                sessionmaker=create_sessionmaker(engine),
                read_sessionmaker=create_read_sessionmaker(engine),
            ),
            book=self.book,
            on_settled=lambda: None,
            pause_provider=lambda _provider, seconds: self.paused.append(seconds),
        )
        self.follower = Follower(
            WatcherContext(
                adapters=adapters,
                sessionmaker=create_sessionmaker(engine),
                read_sessionmaker=create_read_sessionmaker(engine),
            ),
            outcome_check_seconds=0,  # an unclear create is looked up at the next follow
            create_timeout_seconds=60,
            in_flight=lambda: set(),
            on_settled=lambda: None,
        )

    def follower_on(
        self,
        clock: FakeWallClock,
        *,
        in_flight: frozenset[str] = frozenset(),
    ) -> Follower:
        """A follower that waits its real (default) windows, on `clock`."""
        return Follower(
            WatcherContext(
                adapters={self.fake.provider: self.fake},
                sessionmaker=create_sessionmaker(self.engine),
                read_sessionmaker=create_read_sessionmaker(self.engine),
                clock=clock,
            ),
            outcome_check_seconds=OUTCOME_CHECK,
            create_timeout_seconds=CREATE_TIMEOUT,
            in_flight=lambda: set(in_flight),
            on_settled=lambda: None,
        )

    async def attempt(self, order_id: str) -> Attempt:
        """The order's one create attempt, as stored."""
        async with session_scope(create_sessionmaker(self.engine)) as session:
            (attempt,) = (
                await session.scalars(select(Attempt).where(Attempt.order_id == order_id))
            ).all()
            return attempt

    async def order(self, offer: Offer) -> str:
        with registry.offering(fake.SPEC):
            (order_id,) = await waiting_orders(engine=self.engine, offer=offer, credit=100)
        return order_id

    async def deploy(self, order_id: str, offer: Offer) -> None:
        """One claim and its create, as a deploy pass sends them."""
        (intent,), _gone = await self.deployer.claim([Assignment(order_id, offer, PRICE)])
        await self.deployer.send(intent, self.book.take(offer.key))

    async def state(self, order_id: str) -> tuple[OrderStatus, list[str], Decimal, Decimal]:
        """The order's status, its timeline's kinds, and the account's balance and held."""
        async with session_scope(create_sessionmaker(self.engine)) as session:
            order = await session.get(Order, order_id)
            assert order is not None
            kinds: list[str] = [e.kind for e in await orders_service.list_events(
                session, account_id=order.account_id, order_id=order_id)]  # fmt: skip
            account = await accounts.get_account(session, account_id=order.account_id)
            return order.status, kinds, account.balance, account.held


PRICE = Decimal("20.00")
OUTCOME_CHECK, CREATE_TIMEOUT = 10.0, 30.0  # the follower's windows, as in the defaults
MICROSECOND = timedelta(microseconds=1)  # the finest step stored times have
D0, D80, D100 = Decimal(0), Decimal(80), Decimal(100)  # balances: none, after one hour, full
REFUSED = [
    (NoCapacity, OrderEventKind.NO_CAPACITY, OrderStatus.WAITING),
    (RateLimited, OrderEventKind.RATE_LIMITED, OrderStatus.WAITING),
    (ProviderOutOfFunds, OrderEventKind.PROVIDER_FUNDS, OrderStatus.WAITING),
    (AuthFailed, OrderEventKind.PROVIDER_AUTH, OrderStatus.WAITING),
    (Unavailable, OrderEventKind.PROVIDER_UNAVAILABLE, OrderStatus.WAITING),
    (Refused, OrderEventKind.REFUSED, OrderStatus.WAITING),
    (Rejected, OrderEventKind.REJECTED, OrderStatus.FAILED),
]


@pytest.fixture
def path(engine: AsyncEngine) -> DeployPath:
    return DeployPath(engine, FakeAdapter())


async def test_accepted_create_deploys_charges_one_hour_and_runs(path: DeployPath) -> None:
    offer = path.fake.offer(price=PRICE)
    order_id = await path.order(offer)
    await path.deploy(order_id, offer)
    assert await path.state(order_id) == (
        OrderStatus.DEPLOYED, ["placed", "create_sent", "deployed"], D80, D0
    )  # fmt: skip
    (create,) = path.fake.creates
    await path.follower.tick()  # still booting: nothing changes
    assert (await path.state(order_id))[0] == OrderStatus.DEPLOYED
    assert create.vm_id is not None
    path.fake.advance(create.vm_id, VMState.RUNNING, ip="192.0.2.10")
    await path.follower.tick()
    status, kinds, balance, held = await path.state(order_id)
    assert (status, kinds[-1], balance, held) == (OrderStatus.RUNNING, "running", D80, D0)


@pytest.mark.parametrize(("error", "kind", "after"), REFUSED)
async def test_a_refused_create_releases_the_hold_and_says_why(
    path: DeployPath, error: type[ProviderError], kind: OrderEventKind, after: OrderStatus
) -> None:
    offer = path.fake.offer(price=PRICE)
    order_id = await path.order(offer)
    path.fake.queue(Create.fails(error))
    await path.deploy(order_id, offer)
    status, kinds, balance, held = await path.state(order_id)
    assert (status, kinds, balance, held) == (after, ["placed", "create_sent", kind], D100, D0)
    assert [c.vm_id for c in path.fake.creates] == [None]
    assert (offer.key in path.book.cooling()) == (
        error in (NoCapacity, ProviderOutOfFunds, Refused)
    )
    assert path.paused == ([5.0] if error is RateLimited else [])


@pytest.mark.parametrize("made_vm", [True, False])
async def test_an_unclear_create_is_looked_up_at_the_next_follow(
    path: DeployPath, made_vm: bool
) -> None:
    offer = path.fake.offer(price=PRICE)
    order_id = await path.order(offer)
    path.fake.queue(Create.unknown(made_vm=made_vm))
    await path.deploy(order_id, offer)
    assert await path.state(order_id) == (
        OrderStatus.DEPLOYING, ["placed", "create_sent", "outcome_unknown"], D100, PRICE
    )  # fmt: skip
    await path.follower.tick()
    status, kinds, balance, held = await path.state(order_id)
    if made_vm:
        assert (status, kinds[-2:], balance, held) == (
            OrderStatus.DEPLOYED, ["deployed", "adopted"], D80, D0
        )  # fmt: skip
    else:
        assert (status, kinds[-1], balance, held) == (OrderStatus.WAITING, "not_created", D100, D0)
    assert len(path.fake.creates) == 1  # never sent twice


async def test_a_vm_that_fails_before_running_is_deleted_and_refunded(path: DeployPath) -> None:
    offer = path.fake.offer(price=PRICE)
    order_id = await path.order(offer)
    await path.deploy(order_id, offer)
    (create,) = path.fake.creates
    assert create.vm_id is not None
    path.fake.advance(create.vm_id, VMState.FAILED)
    await path.follower.tick()
    status, kinds, balance, held = await path.state(order_id)
    assert (status, kinds[-1], balance, held) == (OrderStatus.WAITING, "vm_failed", D100, D0)
    assert path.fake.deleted == [create.vm_id]


@pytest.mark.parametrize("made_vm", [True, False])
async def test_an_unclear_create_is_looked_up_only_once_the_outcome_check_has_passed(
    path: DeployPath, made_vm: bool
) -> None:
    offer = path.fake.offer(price=PRICE)
    order_id = await path.order(offer)
    path.fake.queue(Create.unknown(made_vm=made_vm))
    await path.deploy(order_id, offer)
    clock = FakeWallClock()
    follower = path.follower_on(clock)
    given_up_at = (await path.attempt(order_id)).updated_at  # the window runs from here
    clock.set(given_up_at + timedelta(seconds=OUTCOME_CHECK) - MICROSECOND)
    await follower.tick()
    assert await path.state(order_id) == (
        OrderStatus.DEPLOYING, ["placed", "create_sent", "outcome_unknown"], D100, PRICE
    )  # fmt: skip
    clock.advance(MICROSECOND.total_seconds())
    await follower.tick()
    status, kinds, _balance, held = await path.state(order_id)
    resolved = (
        ("adopted", OrderStatus.DEPLOYED) if made_vm else ("not_created", OrderStatus.WAITING)
    )
    assert (kinds[-1], status, held) == (*resolved, D0)
    assert len(path.fake.creates) == 1


async def test_a_create_whose_answer_was_never_recorded_is_unclear_after_the_create_timeout(
    path: DeployPath,
) -> None:
    """A claim whose create no process is sending (it crashed between claim and answer)."""
    offer = path.fake.offer(price=PRICE)
    order_id = await path.order(offer)
    await path.deployer.claim([Assignment(order_id, offer, PRICE)])
    clock = FakeWallClock()
    follower = path.follower_on(clock)
    claimed_at = (await path.attempt(order_id)).created_at
    clock.set(claimed_at + timedelta(seconds=CREATE_TIMEOUT) - MICROSECOND)
    await follower.tick()
    assert (await path.attempt(order_id)).status == AttemptStatus.CREATING
    clock.advance(MICROSECOND.total_seconds())
    await follower.tick()
    assert (await path.attempt(order_id)).status == AttemptStatus.UNKNOWN
    assert (await path.state(order_id))[1][-1] == "outcome_unknown"


async def test_a_create_still_in_flight_here_is_not_called_unclear_however_long_it_takes(
    path: DeployPath,
) -> None:
    offer = path.fake.offer(price=PRICE)
    order_id = await path.order(offer)
    await path.deployer.claim([Assignment(order_id, offer, PRICE)])
    attempt = await path.attempt(order_id)
    clock = FakeWallClock(attempt.created_at + timedelta(seconds=10 * CREATE_TIMEOUT))
    await path.follower_on(clock, in_flight=frozenset({attempt.id})).tick()
    assert (await path.attempt(order_id)).status == AttemptStatus.CREATING
    await path.follower_on(clock).tick()  # the same, not in flight: given up on
    assert (await path.attempt(order_id)).status == AttemptStatus.UNKNOWN
