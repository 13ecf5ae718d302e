"""Migrations, schema drift, the SQLite connection settings and its writers' queue."""

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, QueuePool, event, inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.main import create_app
from app.settings import Settings
from app.storage.db import (
    DatabaseInUse,
    WriteGate,
    cancelled_statement_rolls_back,
    create_engine,
    create_read_sessionmaker,
    create_sessionmaker,
    lock_sqlite_file,
    migrate,
    session_scope,
)
from app.storage.models import Base
from tests.fixtures.settings import ADMIN_KEY, SECRET_KEY
from tests.waiting import eventually, started


def _drift(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, Base.metadata))


async def test_migrations_produce_exactly_the_models_schema(empty_database_url: str) -> None:
    engine = create_engine(empty_database_url)
    try:
        await migrate(engine)
        async with engine.connect() as connection:
            drift = await connection.run_sync(_drift)
            tables = await connection.run_sync(lambda c: set(inspect(c).get_table_names()))
    finally:
        await engine.dispose()
    assert drift == []
    assert set(Base.metadata.tables) <= tables


async def test_migrating_twice_changes_nothing(empty_database_url: str) -> None:
    engine = create_engine(empty_database_url)
    try:
        await migrate(engine)
        await migrate(engine)
        async with engine.connect() as connection:
            version = (
                await connection.execute(text("SELECT version_num FROM alembic_version"))
            ).all()
    finally:
        await engine.dispose()
    assert len(version) == 1


async def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(tmp_path: Any) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'wal.db'}")
    try:
        async with engine.connect() as connection:
            journal = (await connection.execute(text("PRAGMA journal_mode"))).scalar_one()
            timeout = (await connection.execute(text("PRAGMA busy_timeout"))).scalar_one()
            foreign_keys = (await connection.execute(text("PRAGMA foreign_keys"))).scalar_one()
    finally:
        await engine.dispose()
    assert journal == "wal"
    assert timeout >= 5000
    assert foreign_keys == 1


SLOW_SELECT = (
    "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 3000000) "
    "SELECT count(*) FROM n"
)


async def _cancel_a_writer_mid_statement(engine: AsyncEngine) -> Any:
    """A writer inserts a row, then is cancelled while its next (slow) statement runs, as a
    watcher's job is when the service stops; returns the writer's aiosqlite connection."""
    async with engine.begin() as connection:
        await connection.execute(text("CREATE TABLE probe (x INTEGER)"))
    slow_started = asyncio.Event()
    used: list[Any] = []

    def note(connection: Connection, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.startswith("WITH RECURSIVE"):
            used.append(connection.connection.dbapi_connection._connection)  # type: ignore[union-attr]
            slow_started.set()

    event.listen(engine.sync_engine, "before_cursor_execute", note)

    async def insert_then_read_slowly() -> None:
        async with session_scope(create_sessionmaker(engine)) as session:
            await session.execute(text("INSERT INTO probe VALUES (1)"))
            await session.execute(text(SLOW_SELECT))

    writer = asyncio.create_task(insert_then_read_slowly())
    await slow_started.wait()
    writer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writer
    return used[0]


def _write_lock_free(path: Path) -> bool:
    """Whether another connection can begin writing at once (no busy wait)."""
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        other.close()


async def test_a_writer_cancelled_mid_statement_rolls_back_and_frees_the_lock(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cancel.db"
    engine = create_engine(f"sqlite+aiosqlite:///{path}")
    try:
        await _cancel_a_writer_mid_statement(engine)
        assert _write_lock_free(path)
        async with engine.connect() as connection:
            assert (await connection.execute(text("SELECT count(*) FROM probe"))).scalar() == 0
    finally:
        await engine.dispose()


async def test_without_the_rollback_a_cancelled_writer_keeps_the_lock(tmp_path: Path) -> None:
    """Control: SQLAlchemy's own handling (close at once) leaves the write lock held."""
    path = tmp_path / "cancel.db"
    engine = create_engine(f"sqlite+aiosqlite:///{path}")
    event.remove(engine.sync_engine, "handle_error", cancelled_statement_rolls_back)
    try:
        aiosqlite_connection = await _cancel_a_writer_mid_statement(engine)

        async def closed() -> bool:  # the slow statement has ended, then the close ran
            return aiosqlite_connection._connection is None

        await eventually(closed)
        assert not _write_lock_free(path)  # closed, yet its cursor keeps it open and locked
    finally:
        await engine.dispose()


def test_a_second_process_on_one_sqlite_file_is_refused(tmp_path: Any) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'one.db'}"
    first = lock_sqlite_file(url)
    assert first is not None
    try:
        with pytest.raises(DatabaseInUse, match="one process only"):
            lock_sqlite_file(url)
    finally:
        first.close()
    again = lock_sqlite_file(url)
    assert again is not None
    again.close()
    assert lock_sqlite_file("postgresql+asyncpg://x@localhost/db") is None


def _gate_of(maker: Any) -> WriteGate:
    gate = maker.kw["info"]["write_gate"]
    assert isinstance(gate, WriteGate)
    return gate


async def test_the_write_gate_lets_urgent_writers_in_before_waiting_requests() -> None:
    gate = WriteGate()
    order: list[str] = []

    async def writer(name: str, *, urgent: bool) -> None:
        async with gate.turn(urgent=urgent):
            order.append(name)

    async with gate.turn(urgent=False):
        tasks = [asyncio.create_task(writer("request 1", urgent=False))]
        await _until_waiting(gate, 1)
        tasks.append(asyncio.create_task(writer("request 2", urgent=False)))
        await _until_waiting(gate, 2)
        tasks.append(asyncio.create_task(writer("claim", urgent=True)))
        await _until_waiting(gate, 3)
        assert order == []  # positive control below: all three do get in once it is free
    await asyncio.gather(*tasks)
    assert order == ["claim", "request 1", "request 2"]


async def test_the_write_gate_passes_to_the_next_waiter_not_to_a_newcomer() -> None:
    gate = WriteGate()
    order: list[str] = []

    async def writer(name: str) -> None:
        async with gate.turn(urgent=False):
            order.append(name)

    async with gate.turn(urgent=False):
        waiter = asyncio.create_task(writer("waited"))
        await _until_waiting(gate, 1)
    # Released with a waiter in line: a newcomer arriving now queues behind it.
    await writer("newcomer")
    await waiter
    assert order == ["waited", "newcomer"]


async def test_a_cancelled_waiter_does_not_keep_the_write_gate() -> None:
    gate = WriteGate()
    async with gate.turn(urgent=False):
        waiter = asyncio.create_task(_hold(gate))
        await _until_waiting(gate, 1)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert gate.waiting == 0
    async with asyncio.timeout(5), gate.turn(urgent=True):
        pass  # free again


async def test_a_waiter_cancelled_just_before_a_release_stays_cancelled() -> None:
    """The release drops the cancelled ticket before the waiter runs its cleanup: the waiter
    must still end cancelled (not with an error its caller would survive), the gate free."""
    gate = WriteGate()
    holder = gate.turn(urgent=False)
    await holder.__aenter__()
    waiter = asyncio.create_task(_hold(gate))
    await _until_waiting(gate, 1)
    waiter.cancel()
    await holder.__aexit__(None, None, None)  # before the waiter has run again
    with pytest.raises(asyncio.CancelledError):
        await waiter
    async with asyncio.timeout(5), gate.turn(urgent=False):
        pass  # free again


async def _hold(gate: WriteGate) -> None:
    async with gate.turn(urgent=False):
        pass


async def _until_waiting(gate: WriteGate, writers: int) -> None:
    async def check() -> bool:
        return gate.waiting == writers

    await eventually(check)


async def test_sqlite_request_writers_wait_in_process_behind_background_writers(
    tmp_path: Any,
) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'gate.db'}")
    try:
        requests = create_sessionmaker(engine, requests=True)
        background = create_sessionmaker(engine)
        gate = _gate_of(requests)
        assert gate is _gate_of(background)  # one gate per database
        order: list[str] = []
        inside, leave = asyncio.Event(), asyncio.Event()

        async def holding_request() -> None:
            async with session_scope(requests) as session:
                await session.execute(text("CREATE TABLE t (n INTEGER)"))
                inside.set()
                await leave.wait()

        async def write(name: str, maker: Any) -> None:
            async with session_scope(maker) as session:
                order.append(name)
                await session.execute(text("INSERT INTO t VALUES (1)"))

        holder = asyncio.create_task(holding_request())
        await inside.wait()
        later = asyncio.create_task(write("request", requests))
        await _until_waiting(gate, 1)
        claim = asyncio.create_task(write("claim", background))
        await _until_waiting(gate, 2)
        assert order == []  # both wait in the process, neither began a transaction
        leave.set()
        await asyncio.gather(holder, later, claim)
        assert order == ["claim", "request"]
        reader = create_read_sessionmaker(engine)
        async with session_scope(reader) as session:
            assert (await session.execute(text("SELECT count(*) FROM t"))).scalar_one() == 2
    finally:
        await engine.dispose()


def test_postgres_sessions_have_no_write_gate() -> None:
    engine = create_engine("postgresql+asyncpg://x@127.0.0.1:9/none")
    assert "write_gate" not in (create_sessionmaker(engine, requests=True).kw.get("info") or {})


async def test_the_pool_settings_reach_the_service_engine(database_url: str) -> None:
    settings = Settings(
        _env_file=None,
        database_url=database_url,
        admin_api_key=ADMIN_KEY,
        secret_key=SECRET_KEY,
        watcher=False,
        db_pool_size=3,
        db_max_overflow=2,
        db_pool_timeout_seconds=4.5,
    )
    app = create_app(settings)
    async with started(app):
        pool = app.state.engine.pool
        assert isinstance(pool, QueuePool)
        assert (pool.size(), pool._max_overflow, pool._timeout) == (3, 2, 4.5)
