"""Reading stock history while the recorder writes it."""

import tracemalloc
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.core.market import Fees
from app.demo.history import Machine, generate
from app.services.stock import days as stock_days
from app.services.stock import history as stock_history
from app.services.stock import reads as stock_reads
from app.storage.db import create_read_sessionmaker, create_sessionmaker, session_scope
from tests.factories import record_history, stock_interval

VERDA = ("verda", "FIN-01", "8B300.240V")
HYPER = ("hyperstack", "CANADA-1", "n3-B300x8")


class _CommitsBeforeThePiecesRead:
    """The session's connection, with the recorder committing `late` just before the read of
    the days' pieces (the streamed statement, after the keys were read), on a connection of its
    own."""

    def __init__(self, connection: Any, engine: AsyncEngine, late: Any) -> None:
        self.connection, self.engine, self.late = connection, engine, late
        self.statements = 0

    async def execute(self, statement: Any) -> Any:
        self.statements += 1
        return await self.connection.execute(statement)

    async def stream(self, statement: Any) -> Any:
        self.statements += 1
        await record_history(self.engine, self.late)
        return await self.connection.stream(statement)


async def _read(session: AsyncSession, end: datetime) -> set[tuple[str, str, str]]:
    found = await stock_reads.stock(
        session, since=end - timedelta(days=1), until=end, gpu_model="B300"
    )
    return set(found)


async def test_a_key_whose_first_day_commits_between_the_two_reads_is_left_to_the_next(
    engine: AsyncEngine, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend != "postgres":
        pytest.skip("an SQLite read transaction sees one snapshot throughout")
    end = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    await record_history(engine, stock_interval(VERDA, end - timedelta(hours=2), end, "40.00"))
    late = stock_interval(HYPER, end - timedelta(hours=2), end, "41.00")
    async with create_read_sessionmaker(engine)() as session:
        connection = _CommitsBeforeThePiecesRead(await session.connection(), engine, late)

        async def connected() -> _CommitsBeforeThePiecesRead:
            return connection

        monkeypatch.setattr(session, "connection", connected)
        first = await _read(session, end)
    assert connection.statements >= 3
    assert first == {VERDA}  # the late key is left to the next read, not a KeyError
    async with create_read_sessionmaker(engine)() as session:
        assert await _read(session, end) == {VERDA, HYPER}  # the control: there it is


DAYS = 30


def _machines(gpu_model: str, keys: int) -> list[Machine]:
    return [
        Machine(
            "verda", f"LAB-{i:02}", f"1{gpu_model}.TEST", gpu_model, 1, Decimal("2.59"), None, 100
        )
        for i in range(keys)
    ]


async def _peak_of_summary(engine: AsyncEngine, gpu_model: str, now: datetime) -> int:
    """The most memory one summary of `gpu_model` over the last DAYS days held at once."""
    async with create_read_sessionmaker(engine)() as session:
        read = stock_reads.summary(
            session, fees=Fees(), since=now - timedelta(days=DAYS), now=now, gpu_model=gpu_model,
            gpu_count=None, providers=None,
        )  # fmt: skip
        tracemalloc.start()
        try:
            found = await read
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert found  # the positive control: the keys were read and summarised
    return peak


async def test_a_summary_holds_one_keys_stock_at_a_time(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 90-day summary over every key held all of it at once: 35 MB on SQLite, each.
    monkeypatch.setattr(stock_reads, "STREAMED_DAYS", DAYS)  # a key's rows a fetch: a small test
    now = datetime.now(UTC).replace(microsecond=0)
    machines = _machines("A100", 1) + _machines("H100", 16)
    made = generate(
        machines, since=now - timedelta(days=DAYS), until=now, fees=Fees(), periods={}, seed=1,
        appearances_per_hour=(30, 30),
    )  # fmt: skip
    async with session_scope(create_sessionmaker(engine)) as session:
        # A summary reads the days the intervals make; writing those alone is quicker.
        await stock_history.insert_generated(session, [], made.windows)
        await stock_days.add_closed(session, made.intervals, generated=True)
    await _peak_of_summary(engine, "H100", now)  # statements compiled and cached once
    one_key = await _peak_of_summary(engine, "A100", now)
    sixteen_keys = await _peak_of_summary(engine, "H100", now)
    assert sixteen_keys < 3 * one_key, (one_key, sixteen_keys)  # before: 6 times
