"""Migrations, schema drift and the SQLite connection settings."""

from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, inspect, text

from app.db import DatabaseInUse, create_engine, lock_sqlite_file, migrate
from app.models import Base


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
