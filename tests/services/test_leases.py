"""The watcher lease: one holder at a time, renewable, taken over once it runs out."""

import asyncio

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import create_sessionmaker, session_scope
from app.services import leases


async def _acquire(engine: AsyncEngine, holder: str, ttl: float = 10.0) -> bool:
    async with session_scope(create_sessionmaker(engine)) as session:
        return await leases.acquire(session, name="watcher", holder=holder, ttl=ttl)


async def test_the_first_comer_holds_it_and_may_renew(engine: AsyncEngine) -> None:
    assert await _acquire(engine, "a")
    assert await _acquire(engine, "a")
    assert not await _acquire(engine, "b")


async def test_an_expired_lease_is_taken_over(engine: AsyncEngine) -> None:
    assert await _acquire(engine, "a", ttl=0.2)
    assert not await _acquire(engine, "b")
    await asyncio.sleep(0.25)
    assert await _acquire(engine, "b")
    assert not await _acquire(engine, "a")


async def test_a_released_lease_is_free_at_once(engine: AsyncEngine) -> None:
    assert await _acquire(engine, "a")
    async with session_scope(create_sessionmaker(engine)) as session:
        await leases.release(session, name="watcher", holder="a")
    assert await _acquire(engine, "b")


async def test_only_one_of_many_racing_replicas_wins(engine: AsyncEngine) -> None:
    results = await asyncio.gather(*(_acquire(engine, f"replica-{i}") for i in range(8)))
    assert results.count(True) == 1


async def test_the_only_process_may_take_a_lease_left_by_a_dead_one(engine: AsyncEngine) -> None:
    assert await _acquire(engine, "killed")
    async with session_scope(create_sessionmaker(engine)) as session:
        taken = await leases.acquire(
            session, name="watcher", holder="restarted", ttl=10, force=True
        )
    assert taken
    assert not await _acquire(engine, "killed")
