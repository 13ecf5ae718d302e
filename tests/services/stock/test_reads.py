"""Reading stock history while the recorder writes it."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.services.stock import reads as stock_reads
from app.storage.db import create_read_sessionmaker
from tests.factories import record_history, stock_interval

VERDA = ("verda", "FIN-01", "8B300.240V")
HYPER = ("hyperstack", "CANADA-1", "n3-B300x8")


class _CommitsBeforeSecondRead:
    """The session's connection, with the recorder committing `late` just before the second
    statement (the read of the days' pieces), on a connection of its own."""

    def __init__(self, connection: Any, engine: AsyncEngine, late: Any) -> None:
        self.connection, self.engine, self.late = connection, engine, late
        self.statements = 0

    async def execute(self, statement: Any) -> Any:
        self.statements += 1
        if self.statements == 2:
            await record_history(self.engine, self.late)
        return await self.connection.execute(statement)


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
        connection = _CommitsBeforeSecondRead(await session.connection(), engine, late)

        async def connected() -> _CommitsBeforeSecondRead:
            return connection

        monkeypatch.setattr(session, "connection", connected)
        first = await _read(session, end)
    assert connection.statements >= 2
    assert first == {VERDA}  # the late key is left to the next read, not a KeyError
    async with create_read_sessionmaker(engine)() as session:
        assert await _read(session, end) == {VERDA, HYPER}  # the control: there it is
