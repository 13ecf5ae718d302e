"""The follower on an injected clock: a deployed machine that does not run within its
provider's boot deadline is deleted and refunded, and a status nobody knows is said, not
waited on in silence. In memory (a FakeAdapter), both databases; nothing sleeps."""

import logging
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.states import AttemptStatus, OrderEventKind, OrderStatus
from app.providers import fake, registry
from app.providers.base import Unavailable, VMState
from app.providers.fake import FakeSettings
from app.services import accounts
from app.services import orders as orders_service
from app.settings import Settings
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Attempt, Order
from tests.clock import TICK, FakeWallClock
from tests.watcher.in_memory import InMemory

DEADLINE_MINUTES = 7.0  # the fake provider's, as a test sets it (not the default)
DEADLINE = timedelta(minutes=DEADLINE_MINUTES)
CREDIT, HOUR, D0 = Decimal(100), Decimal("20.00"), Decimal(0)  # credit, an hour, nothing
ODD_STATUS = "reticulating_splines"  # what the simulators' `unknown_status` fault answers


@pytest.fixture
def clock() -> FakeWallClock:
    return FakeWallClock()


@pytest.fixture
async def memory(
    engine: AsyncEngine, settings: Settings, clock: FakeWallClock
) -> AsyncIterator[InMemory]:
    """The watcher in memory on `clock`, the fake provider's boot deadline 7 minutes."""
    deadline = FakeSettings(boot_deadline_minutes=DEADLINE_MINUTES)
    with_deadline = settings.model_copy(
        update={"providers": {**settings.providers, "fake": deadline}}
    )
    with registry.offering(fake.SPEC):
        yield InMemory(engine, with_deadline, wall_clock=clock)


async def deployed(memory: InMemory) -> tuple[str, str, datetime]:
    """An order deployed on the fake: its id, its VM's id, and when its create was accepted."""
    order_id = await memory.order()
    await memory.poll(memory.offer)
    attempt = await attempt_of(memory, order_id)
    assert attempt.status is AttemptStatus.DEPLOYED and attempt.provider_vm_id is not None
    return order_id, attempt.provider_vm_id, attempt.updated_at


async def attempt_of(memory: InMemory, order_id: str) -> Attempt:
    async with session_scope(create_sessionmaker(memory.engine)) as session:
        found = select(Attempt).where(Attempt.order_id == order_id)
        (attempt,) = (await session.scalars(found)).all()
        return attempt


async def timeline(memory: InMemory, order_id: str) -> list[tuple[str, str]]:
    """The order's timeline as (kind, message), oldest first."""
    async with session_scope(create_sessionmaker(memory.engine)) as session:
        order = await session.get(Order, order_id)
        assert order is not None
        lines = await orders_service.list_events(
            session, account_id=order.account_id, order_id=order_id
        )
        return [(line.kind, line.message) for line in lines]


async def money(memory: InMemory, order_id: str) -> tuple[Decimal, Decimal]:
    """The order's account's balance and held."""
    async with session_scope(create_sessionmaker(memory.engine)) as session:
        order = await session.get(Order, order_id)
        assert order is not None
        account = await accounts.get_account(session, account_id=order.account_id)
        return account.balance, account.held


def metric(name: str) -> float:
    return REGISTRY.get_sample_value(name, {"provider": "fake"}) or 0.0


def said(lines: list[tuple[str, str]], kind: OrderEventKind) -> list[str]:
    return [message for k, message in lines if k == kind]


class TestBootDeadline:
    async def test_a_machine_not_running_by_its_providers_deadline_is_deleted_and_refunded(
        self, memory: InMemory, clock: FakeWallClock
    ) -> None:
        order_id, vm_id, accepted = await deployed(memory)
        assert await money(memory, order_id) == (CREDIT - HOUR, D0)
        missed = metric("autoprovision_boot_deadlines_missed_total")
        clock.set(accepted + DEADLINE - timedelta(seconds=TICK))
        await memory.watcher.follower.tick()
        assert await memory.status(order_id) == OrderStatus.DEPLOYED
        assert memory.fake.deleted == []

        clock.advance(TICK)
        await memory.watcher.follower.tick()
        assert await memory.status(order_id) == OrderStatus.WAITING
        assert (await attempt_of(memory, order_id)).status is AttemptStatus.FAILED
        assert memory.fake.deleted == [vm_id]
        assert await money(memory, order_id) == (CREDIT, D0)
        (line,) = said(await timeline(memory, order_id), OrderEventKind.VM_FAILED)
        assert f"not running {DEADLINE_MINUTES:g} minutes after" in line, line
        assert "refunded $20.00; keeps waiting" in line, line
        assert metric("autoprovision_boot_deadlines_missed_total") == missed + 1

    async def test_the_deadline_runs_from_the_accepted_create_not_the_claim(
        self, memory: InMemory, clock: FakeWallClock
    ) -> None:
        """A create accepted an hour after its claim (an unclear one, looked up late) still
        has the whole deadline from the moment it was known to be accepted."""
        order_id, _vm_id, accepted = await deployed(memory)
        async with session_scope(create_sessionmaker(memory.engine)) as session:
            await session.execute(
                update(Attempt)
                .where(Attempt.order_id == order_id)
                .values(created_at=accepted - timedelta(hours=1))
            )
        clock.set(accepted + DEADLINE - timedelta(seconds=TICK))
        await memory.watcher.follower.tick()
        assert await memory.status(order_id) == OrderStatus.DEPLOYED
        clock.advance(TICK)  # positive control: the deadline from the accepted create
        await memory.watcher.follower.tick()
        assert await memory.status(order_id) == OrderStatus.WAITING

    async def test_positive_control_a_machine_running_within_its_deadline_is_not_touched(
        self, memory: InMemory, clock: FakeWallClock
    ) -> None:
        order_id, vm_id, accepted = await deployed(memory)
        clock.set(accepted + DEADLINE - timedelta(seconds=TICK))
        memory.fake.advance(vm_id, VMState.RUNNING, ip="192.0.2.10")
        await memory.watcher.follower.tick()
        assert await memory.status(order_id) == OrderStatus.RUNNING
        clock.advance(3600)
        await memory.watcher.follower.tick()
        assert await memory.status(order_id) == OrderStatus.RUNNING
        assert memory.fake.deleted == []
        assert await money(memory, order_id) == (CREDIT - HOUR, D0)

    async def test_a_delete_refused_at_the_deadline_is_said_once_and_sent_again(
        self, memory: InMemory, clock: FakeWallClock
    ) -> None:
        order_id, vm_id, accepted = await deployed(memory)
        memory.fake.delete_errors.extend([Unavailable, Unavailable])
        clock.set(accepted + DEADLINE)
        await memory.watcher.follower.tick()
        await memory.watcher.follower.tick()
        assert await memory.status(order_id) == OrderStatus.DEPLOYED
        (line,) = said(await timeline(memory, order_id), OrderEventKind.DELETE_RETRY)
        assert "not running 7 minutes after" in line and "sent again" in line, line
        assert await money(memory, order_id) == (CREDIT - HOUR, D0)  # nothing settled yet

        await memory.watcher.follower.tick()  # the provider takes it
        assert await memory.status(order_id) == OrderStatus.WAITING
        assert memory.fake.deleted == [vm_id]
        assert await money(memory, order_id) == (CREDIT, D0)

    async def test_a_machine_that_runs_before_its_late_delete_is_taken_is_the_orders(
        self, memory: InMemory, clock: FakeWallClock
    ) -> None:
        """A provider that refuses deletes while a VM boots (Verda, Hyperstack) may run it
        before it takes one: a machine that runs is what the order waited for."""
        order_id, vm_id, accepted = await deployed(memory)
        memory.fake.delete_errors.append(Unavailable)
        clock.set(accepted + DEADLINE)
        await memory.watcher.follower.tick()
        memory.fake.advance(vm_id, VMState.RUNNING, ip="192.0.2.10")
        await memory.watcher.follower.tick()
        assert await memory.status(order_id) == OrderStatus.RUNNING
        assert memory.fake.deleted == []


class TestUnknownStatus:
    async def test_an_unknown_status_is_said_once_warned_once_and_counted_per_read(
        self, memory: InMemory, clock: FakeWallClock, caplog: pytest.LogCaptureFixture
    ) -> None:
        order_id, vm_id, accepted = await deployed(memory)
        memory.fake.advance(vm_id, VMState.UNKNOWN, status=ODD_STATUS)
        read = metric("autoprovision_unknown_vm_statuses_total")
        clock.set(accepted + timedelta(seconds=30))
        with caplog.at_level(logging.WARNING, logger="app.watcher.follower"):
            for _ in range(3):
                await memory.watcher.follower.tick()
        (line,) = said(await timeline(memory, order_id), OrderEventKind.STATUS_UNKNOWN)
        assert ODD_STATUS in line and vm_id in line, line
        assert "deleted and refunded" in line, line  # what happens if it never runs
        warned = [r for r in caplog.records if ODD_STATUS in r.getMessage()]
        assert len(warned) == 1 and warned[0].levelno == logging.WARNING
        assert metric("autoprovision_unknown_vm_statuses_total") == read + 3
        assert await memory.status(order_id) == OrderStatus.DEPLOYED

        memory.fake.advance(vm_id, VMState.UNKNOWN, status="frobnicating")  # another reason
        await memory.watcher.follower.tick()
        lines = said(await timeline(memory, order_id), OrderEventKind.STATUS_UNKNOWN)
        assert len(lines) == 2 and "frobnicating" in lines[1], lines

        clock.set(accepted + DEADLINE)  # saying so did not move the deadline
        await memory.watcher.follower.tick()
        assert await memory.status(order_id) == OrderStatus.WAITING

    async def test_a_machine_whose_status_is_never_read_is_deleted_at_its_deadline(
        self, memory: InMemory, clock: FakeWallClock
    ) -> None:
        order_id, vm_id, accepted = await deployed(memory)
        memory.fake.advance(vm_id, VMState.UNKNOWN, status=ODD_STATUS)
        clock.set(accepted + DEADLINE)
        await memory.watcher.follower.tick()
        assert await memory.status(order_id) == OrderStatus.WAITING
        assert memory.fake.deleted == [vm_id]
        assert await money(memory, order_id) == (CREDIT, D0)
        lines = await timeline(memory, order_id)
        (line,) = said(lines, OrderEventKind.VM_FAILED)
        assert ODD_STATUS in line, line  # the last status it showed
        assert said(lines, OrderEventKind.STATUS_UNKNOWN) == []  # the deadline said it all

    async def test_positive_control_an_unknown_status_then_running_runs(
        self, memory: InMemory, clock: FakeWallClock
    ) -> None:
        order_id, vm_id, accepted = await deployed(memory)
        clock.set(accepted + timedelta(seconds=30))
        memory.fake.advance(vm_id, VMState.UNKNOWN, status=ODD_STATUS)
        await memory.watcher.follower.tick()
        memory.fake.advance(vm_id, VMState.RUNNING, ip="192.0.2.10")
        await memory.watcher.follower.tick()
        assert await memory.status(order_id) == OrderStatus.RUNNING
        kinds = [kind for kind, _ in await timeline(memory, order_id)]
        assert kinds[-2:] == [OrderEventKind.STATUS_UNKNOWN, OrderEventKind.RUNNING]
