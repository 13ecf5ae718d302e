"""The terminator against a provider that answers as told, on a clock the test moves: when a
refused delete goes again, that a delete our own budget held back is not counted as sent, and
that every delete goes as an urgent request."""

from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from functools import partial

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Provider
from app.core.states import OrderEventKind, OrderStatus, TerminateReason
from app.providers import fake, registry
from app.providers.base import HeldBack, ProviderError, RateLimited, Unavailable, is_urgent
from app.providers.fake import FakeAdapter
from app.services import attempts, terminations
from app.storage.db import create_read_sessionmaker, create_sessionmaker, session_scope
from app.storage.models import Attempt, OrderEvent
from app.watcher.context import WatcherContext
from app.watcher.terminator import (
    RETRY_MAX_SECONDS,
    Terminator,
    delete_retry_in,
    retry_after,
)
from tests.clock import FakeWallClock
from tests.factories import claimed, order_status


class Deletes:
    """A machine running at a FakeAdapter, its order terminated, and the terminator that ends
    it on a wall clock the test moves."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.maker = create_sessionmaker(engine)
        self.fake = FakeAdapter()
        self.clock = FakeWallClock()
        self.terminator = Terminator(
            WatcherContext(
                adapters={self.fake.provider: self.fake},
                sessionmaker=self.maker,
                read_sessionmaker=create_read_sessionmaker(engine),
                clock=self.clock,
            ),
        )
        self.order_id = ""
        self.vm_id = ""

    async def terminated(self) -> "Deletes":
        """Deploy one machine and ask to terminate its order."""
        offer = self.fake.offer()
        (intent,) = await claimed(self.engine, offer)
        vm = await self.fake.create_vm(offer, name="vm", tag="tag", ssh_public_key=None)
        async with session_scope(self.maker) as session:
            await attempts.settle_created(session, attempt_id=intent.attempt_id, vm=vm)
        async with session_scope(self.maker) as session:
            await terminations.request(
                session,
                order_id=intent.order_id,
                account_id=None,
                reason=TerminateReason.REQUESTED,
                now=self.clock(),
            )
        self.order_id, self.vm_id = intent.order_id, vm.id
        return self

    async def next_delete_in(self) -> timedelta:
        async with session_scope(self.maker) as session:
            due = await session.scalar(
                select(Attempt.next_delete_at).where(Attempt.order_id == self.order_id)
            )
        assert due is not None
        return due - self.clock()

    async def sent_deletes(self) -> int:
        """How many deletes the order's attempt counts as sent."""
        async with session_scope(self.maker) as session:
            sent = await session.scalar(
                select(Attempt.delete_attempts).where(Attempt.order_id == self.order_id)
            )
        assert sent is not None
        return sent

    async def retry_lines(self) -> list[str]:
        """What the order's timeline said of deletes that did not go through."""
        async with session_scope(self.maker) as session:
            lines = await session.scalars(
                select(OrderEvent.message)
                .where(
                    OrderEvent.order_id == self.order_id,
                    OrderEvent.kind == OrderEventKind.DELETE_RETRY,
                )
                .order_by(OrderEvent.id)
            )
            return list(lines)


@pytest.fixture
async def deletes(engine: AsyncEngine) -> AsyncIterator[Deletes]:
    with registry.offering(fake.SPEC):
        yield await Deletes(engine).terminated()


def test_a_rate_limit_sets_when_the_delete_goes_again_within_the_cap() -> None:
    provider = Provider("hyperstack")
    limited = partial(RateLimited, provider, "slow down")
    assert delete_retry_in(limited(retry_after=7.0), 0) == timedelta(seconds=7)
    assert delete_retry_in(limited(retry_after=7.0), 5) == timedelta(seconds=7)
    assert delete_retry_in(limited(retry_after=900.0), 0) == timedelta(seconds=RETRY_MAX_SECONDS)
    # Without a word on when, or for any other failure, the back-off decides.
    assert delete_retry_in(limited(retry_after=None), 3) == retry_after(3)
    assert delete_retry_in(Unavailable(provider, "down"), 3) == retry_after(3)


async def test_a_delete_the_provider_rate_limits_goes_when_it_said(deletes: Deletes) -> None:
    wait_for_room: Callable[..., ProviderError] = partial(RateLimited, retry_after=7.0)
    deletes.fake.fail_deletes(wait_for_room)  # type: ignore[arg-type]
    await deletes.terminator.tick()
    assert deletes.fake.calls["delete_vm"] == 1
    assert await deletes.next_delete_in() == timedelta(seconds=7)  # the back-off says 1 s

    deletes.clock.advance(6.9)
    await deletes.terminator.tick()
    assert deletes.fake.calls["delete_vm"] == 1  # not before it said
    deletes.clock.advance(0.1)
    await deletes.terminator.tick()
    assert deletes.fake.calls["delete_vm"] == 2  # and then at once
    assert deletes.fake.deleted == [deletes.vm_id]
    assert await order_status(deletes.engine, deletes.order_id) is OrderStatus.TERMINATED


async def test_a_refused_delete_backs_off_as_before(deletes: Deletes) -> None:
    deletes.fake.fail_deletes(Unavailable)
    await deletes.terminator.tick()
    assert await deletes.next_delete_in() == retry_after(0)


async def test_a_delete_our_budget_held_back_is_not_counted_as_sent(deletes: Deletes) -> None:
    held: Callable[..., ProviderError] = partial(HeldBack, retry_after=7.0)
    deletes.fake.fail_deletes(held, Unavailable)  # type: ignore[arg-type]
    await deletes.terminator.tick()
    assert await deletes.sent_deletes() == 0
    assert await deletes.next_delete_in() == timedelta(seconds=7)

    deletes.clock.advance(7)
    await deletes.terminator.tick()  # sent this time, and refused: that one counts
    assert await deletes.sent_deletes() == 1
    held_line, refused_line = await deletes.retry_lines()
    assert "waits for" in held_line and held_line.endswith("sent when there is room.")
    assert "did not take the delete" in refused_line and refused_line.endswith("sent again.")


async def test_deletes_go_as_urgent_requests(deletes: Deletes) -> None:
    sent_urgently: list[bool] = []
    delete_vm = deletes.fake.delete_vm

    async def watched(vm_id: str) -> None:
        sent_urgently.append(is_urgent())
        await delete_vm(vm_id)

    deletes.fake.delete_vm = watched  # type: ignore[method-assign]
    assert not is_urgent()  # outside the terminator, nothing is
    await deletes.terminator.tick()
    assert sent_urgently == [True]
    assert await order_status(deletes.engine, deletes.order_id) is OrderStatus.TERMINATED
