"""The watcher lease: one holder at a time, renewable, taken over once it runs out.

Expiry is decided on the `now` each caller passes: a fake wall clock here, moved by hand.
"""

import asyncio
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from app.services import leases
from app.storage.db import create_sessionmaker, session_scope
from tests.clock import FakeWallClock

TTL = 10.0
MICROSECOND = 1e-6  # the finest step stored times have


async def _acquire(
    engine: AsyncEngine, holder: str, clock: FakeWallClock, ttl: float = TTL, force: bool = False
) -> bool:
    async with session_scope(create_sessionmaker(engine)) as session:
        return await leases.acquire(
            session, name="watcher", holder=holder, ttl=ttl, now=clock(), force=force
        )


async def _release(engine: AsyncEngine, holder: str, clock: FakeWallClock) -> None:
    async with session_scope(create_sessionmaker(engine)) as session:
        await leases.release(session, name="watcher", holder=holder, now=clock())


async def test_the_first_comer_holds_it_and_may_renew(engine: AsyncEngine) -> None:
    clock = FakeWallClock()
    assert await _acquire(engine, "a", clock)
    assert await _acquire(engine, "a", clock)
    assert not await _acquire(engine, "b", clock)


async def test_a_lease_is_not_taken_before_it_runs_out_and_is_taken_when_it_does(
    engine: AsyncEngine,
) -> None:
    clock = FakeWallClock()
    assert await _acquire(engine, "a", clock)
    clock.advance(TTL - MICROSECOND)
    assert not await _acquire(engine, "b", clock)
    clock.advance(MICROSECOND)
    assert await _acquire(engine, "b", clock)
    assert not await _acquire(engine, "a", clock)  # the old holder is out until b stops


async def test_a_renewal_runs_the_time_to_live_again_from_then(engine: AsyncEngine) -> None:
    clock = FakeWallClock()
    assert await _acquire(engine, "a", clock)
    clock.advance(TTL / 3)
    assert await _acquire(engine, "a", clock)
    renewed_at = clock()
    clock.advance(TTL - MICROSECOND)  # past the first expiry, not the renewed one
    assert not await _acquire(engine, "b", clock)
    clock.set(renewed_at + timedelta(seconds=TTL))
    assert await _acquire(engine, "b", clock)


async def test_a_released_lease_is_free_at_once(engine: AsyncEngine) -> None:
    clock = FakeWallClock()
    assert await _acquire(engine, "a", clock)
    assert not await _acquire(engine, "b", clock)
    await _release(engine, "a", clock)
    assert await _acquire(engine, "b", clock)


async def test_only_the_holder_can_release_it(engine: AsyncEngine) -> None:
    clock = FakeWallClock()
    assert await _acquire(engine, "a", clock)
    await _release(engine, "b", clock)
    assert not await _acquire(engine, "b", clock)
    await _release(engine, "a", clock)  # the same, by its holder: it is free
    assert await _acquire(engine, "b", clock)


async def test_only_one_of_many_racing_replicas_wins(engine: AsyncEngine) -> None:
    clock = FakeWallClock()
    results = await asyncio.gather(*(_acquire(engine, f"replica-{i}", clock) for i in range(8)))
    assert results.count(True) == 1


async def test_the_only_process_may_take_a_lease_left_by_a_dead_one(engine: AsyncEngine) -> None:
    clock = FakeWallClock()
    assert await _acquire(engine, "killed", clock)
    assert not await _acquire(engine, "restarted", clock)  # not without force
    assert await _acquire(engine, "restarted", clock, force=True)
    assert not await _acquire(engine, "killed", clock)
