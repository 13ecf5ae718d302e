"""Engine, sessions and migrations for SQLite (default) and PostgreSQL."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, event, text
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


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that write: on SQLite they take the write lock when they begin."""
    return async_sessionmaker(engine, expire_on_commit=False, autoflush=False)


def create_read_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that only read: on SQLite they never wait for the write lock."""
    reader = engine.execution_options(sqlite_begin="DEFERRED")
    return async_sessionmaker(reader, expire_on_commit=False, autoflush=False)


@asynccontextmanager
async def session_scope(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> AsyncIterator[AsyncSession]:
    """One unit of work: commits if the caller finishes, rolls back if it raises."""
    async with sessionmaker() as session:
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
