"""Engine, sessions and migrations for SQLite (default) and PostgreSQL."""

import asyncio
import contextlib
import fcntl
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000
MIGRATION_LOCK_ID = (
    7_245_310_001  # pg_advisory_lock key: replicas starting together migrate in turn
)


def create_engine(database_url: str, **kwargs: Any) -> AsyncEngine:
    """An async engine; on SQLite, with WAL, a busy timeout and write-ready transactions."""
    if not database_url.startswith("sqlite"):
        return create_async_engine(database_url, pool_pre_ping=True, **kwargs)
    engine = create_async_engine(database_url, **kwargs)
    _configure_sqlite(engine)
    return engine


def _configure_sqlite(engine: AsyncEngine) -> None:
    # Python's sqlite3 opens transactions lazily and only before writes, so a transaction that
    # read first and writes later can fail with SQLITE_BUSY_SNAPSHOT instead of waiting. Taking
    # control of BEGIN (SQLAlchemy's documented recipe) and beginning IMMEDIATE makes writers
    # queue on busy_timeout; read-only sessions opt into a plain deferred BEGIN.
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get("sqlite_begin", "IMMEDIATE")
        connection.exec_driver_sql(f"BEGIN {mode}")


# SQLite takes one writer at a time. Writers of this process queue on this lock instead of on
# SQLite's busy handler, which sleeps in growing steps (1, 2, 5, 10 ... 100 ms) and so adds
# milliseconds to a claim or an order placed right behind another write.
_write_gates: "weakref.WeakKeyDictionary[Engine, asyncio.Lock]" = weakref.WeakKeyDictionary()


def create_sessionmaker(
    engine: AsyncEngine, *, queue: bool = True
) -> async_sessionmaker[AsyncSession]:
    """Sessions that write: on SQLite they take the write lock when they begin.

    `queue=False` leaves them out of this process's writer queue (SQLite's own lock still
    applies): for request handlers, which hold a session across CPU-heavy work, so queued
    behind them the watcher's claims would wait on other requests' parsing and rendering.
    """
    if engine.dialect.name == "sqlite" and queue:
        _write_gates.setdefault(engine.sync_engine, asyncio.Lock())
        return async_sessionmaker(engine, expire_on_commit=False, autoflush=False)
    unqueued = engine.execution_options(writer_queue=False)
    return async_sessionmaker(unqueued, expire_on_commit=False, autoflush=False)


def create_read_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that only read: on SQLite they never wait for the write lock."""
    reader = engine.execution_options(sqlite_begin="DEFERRED")
    return async_sessionmaker(reader, expire_on_commit=False, autoflush=False)


@asynccontextmanager
async def session_scope(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> AsyncIterator[AsyncSession]:
    """One unit of work: commits if the caller finishes, rolls back if it raises.

    On SQLite a writing session first waits its turn among this process's writers.
    """
    bind = sessionmaker.kw.get("bind")
    gate = _write_gates.get(bind.sync_engine) if isinstance(bind, AsyncEngine) else None
    async with gate or contextlib.nullcontext(), sessionmaker() as session:
        try:
            yield session
            await session.commit()
        except BaseException:
            await session.rollback()
            raise


def alembic_config(database_url: str) -> Config:
    """An Alembic config for this project's migrations against `database_url`."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


async def migrate(engine: AsyncEngine) -> None:
    """Bring the database schema up to the newest migration (safe with several replicas)."""
    async with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            await connection.execute(text(f"SELECT pg_advisory_lock({MIGRATION_LOCK_ID})"))
        try:
            await connection.run_sync(_upgrade, engine.url.render_as_string(hide_password=False))
            await connection.commit()
        finally:
            if engine.dialect.name == "postgresql":
                await connection.execute(text(f"SELECT pg_advisory_unlock({MIGRATION_LOCK_ID})"))
                await connection.commit()


def _upgrade(connection: Connection, database_url: str) -> None:
    config = alembic_config(database_url)
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


class DatabaseInUse(RuntimeError):
    """Another process already serves this SQLite file."""


def lock_sqlite_file(database_url: str) -> TextIO | None:
    """Hold an exclusive lock beside an SQLite file for this process's lifetime.

    SQLite is for one process: two would each run a watcher against the same orders. The OS
    drops the lock when the process dies, however it dies. Returns the open lock file (keep it
    open), or None for databases that need no lock.
    """
    url = make_url(database_url)
    if not url.drivername.startswith("sqlite") or url.database in (None, "", ":memory:"):
        return None
    path = Path(url.database).resolve()
    lock = (path.parent / f"{path.name}.lock").open("a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        lock.close()
        raise DatabaseInUse(
            f"another autoprovision process is already using {path}: SQLite serves one "
            "process only (stop the other one, or use PostgreSQL to run several replicas)"
        ) from exc
    return lock
