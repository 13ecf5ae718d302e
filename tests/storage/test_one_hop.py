"""The one-hop writer: a whole transaction as one synchronous function, one loop wait on SQLite."""

import asyncio
import threading
from collections.abc import Awaitable, Generator, Iterator
from typing import Any, TypeVar

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.storage.db import WriteGate, create_read_sessionmaker, create_sessionmaker, session_scope
from app.storage.one_hop import OneHopWriter
from tests.waiting import eventually

T = TypeVar("T")
STATEMENTS = 10


class Suspensions:
    """Awaits a coroutine and counts how often it hands the event loop back before it is done
    (each is a wait for the loop, as long as whatever else runs on it then)."""

    def __init__(self, awaitable: Awaitable[T]) -> None:
        self.awaitable = awaitable
        self.count = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        inner = self.awaitable.__await__()
        try:
            to_loop = next(inner)
            while True:
                self.count += 1
                try:
                    sent = yield to_loop
                except BaseException as exc:  # handed on to the coroutine
                    to_loop = inner.throw(exc)
                else:
                    to_loop = inner.send(sent)
        except StopIteration as stop:
            return stop.value


def insert_rows(connection: Connection) -> str:
    for n in range(STATEMENTS):
        connection.execute(text("INSERT INTO one_hop (n) VALUES (:n)"), {"n": n})
    return threading.current_thread().name


async def rows(engine: AsyncEngine) -> int:
    async with session_scope(create_read_sessionmaker(engine)) as session:
        return int((await session.execute(text("SELECT count(*) FROM one_hop"))).scalar_one())


async def in_line(gate: WriteGate, writers: int) -> None:
    """Until `writers` writers wait at the gate for their turn."""

    async def check() -> bool:
        return gate.waiting == writers

    await eventually(check)


@pytest.fixture
def writer(table: AsyncEngine) -> Iterator[OneHopWriter]:
    """A writer on the table's database, closed after the test."""
    made = OneHopWriter(create_sessionmaker(table))
    yield made
    made.close()


@pytest.fixture
async def table(engine: AsyncEngine) -> AsyncEngine:
    async with session_scope(create_sessionmaker(engine)) as session:
        await session.execute(text("CREATE TABLE one_hop (n INTEGER)"))
    return engine


async def test_work_that_returns_is_committed_and_work_that_raises_is_rolled_back(
    table: AsyncEngine, writer: OneHopWriter
) -> None:
    await writer.run(insert_rows)
    assert await rows(table) == STATEMENTS

    def half_then_fail(connection: Connection) -> None:
        insert_rows(connection)
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await writer.run(half_then_fail)
    assert await rows(table) == STATEMENTS  # nothing of the failed one


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_on_sqlite_a_transaction_of_many_statements_waits_for_the_loop_once(
    table: AsyncEngine, writer: OneHopWriter
) -> None:
    assert writer.threaded
    one_hop = Suspensions(writer.run(insert_rows))
    assert (await one_hop).startswith("one-hop writer")
    assert one_hop.count <= 2
    # The control: the same statements through a session wait for the loop each time.

    async def through_a_session() -> None:
        async with session_scope(writer.sessionmaker) as session:
            connection = await session.connection()
            await connection.run_sync(insert_rows)

    per_statement = Suspensions(through_a_session())
    await per_statement
    assert per_statement.count > STATEMENTS
    assert await rows(table) == 2 * STATEMENTS


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_it_waits_for_the_writer_writing_and_goes_before_those_in_line(
    table: AsyncEngine, writer: OneHopWriter
) -> None:
    sessionmaker = writer.sessionmaker
    gate = sessionmaker.kw["info"]["write_gate"]
    inside, leave = asyncio.Event(), asyncio.Event()
    order: list[str] = []

    async def holder() -> None:
        async with session_scope(sessionmaker) as session:
            await session.execute(text("INSERT INTO one_hop (n) VALUES (-1)"))
            inside.set()
            await leave.wait()

    async def background_writer() -> None:
        async with session_scope(sessionmaker) as session:
            order.append("background")
            await session.execute(text("INSERT INTO one_hop (n) VALUES (-2)"))

    def claim(connection: Connection) -> None:
        order.append("claim")
        insert_rows(connection)

    holding = asyncio.create_task(holder())
    await inside.wait()
    queued = asyncio.create_task(background_writer())
    await in_line(gate, 1)
    claiming = asyncio.create_task(writer.run(claim))
    await in_line(gate, 2)
    assert order == [] and not claiming.done()  # both in line, neither in a transaction
    leave.set()
    await asyncio.gather(holding, queued, claiming)
    assert order == ["claim", "background"]  # the claim went first, though it came last
    assert await rows(table) == STATEMENTS + 2


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_cancelled_mid_transaction_it_keeps_its_turn_until_the_thread_is_done(
    table: AsyncEngine, writer: OneHopWriter
) -> None:
    started, finish = threading.Event(), threading.Event()

    def slow(connection: Connection) -> None:
        insert_rows(connection)
        started.set()
        finish.wait(timeout=30)

    try:
        running = asyncio.create_task(writer.run(slow))
        await asyncio.to_thread(started.wait, 30)
        running.cancel()
        after = asyncio.create_task(writer.run(insert_rows))

        await in_line(writer.sessionmaker.kw["info"]["write_gate"], 1)  # the cancelled one's
        finish.set()
        with pytest.raises(asyncio.CancelledError):
            await running
        await after
        # What the thread had written was committed: the caller cancelled, not the work.
        assert await rows(table) == 2 * STATEMENTS
    finally:
        finish.set()  # else closing the writer waits for the thread's 30 s
