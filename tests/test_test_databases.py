"""The PostgreSQL database each test worker lends to one test at a time: the next test finds it
as the template was, and one whose schema a test changed is cloned anew."""

import asyncio

from sqlalchemy import text

from app.storage.db import create_engine
from tests.databases import WorkerDatabase
from tests.factories import account_in_database

COUNT_ACCOUNTS = "SELECT count(*) FROM accounts"


async def _run(url: str, *statements: str) -> object:
    """Run each statement in one transaction; the last one's first value."""
    engine = create_engine(url)
    try:
        async with engine.begin() as connection:
            for statement in statements:
                result = await connection.execute(text(statement))
        return result.scalar() if result.returns_rows else None
    finally:
        await engine.dispose()


async def _account_made(url: str) -> None:
    engine = create_engine(url)
    try:
        await account_in_database(engine)
    finally:
        await engine.dispose()


def test_the_next_test_finds_the_database_empty(
    postgres_worker_database: WorkerDatabase,
) -> None:
    url = postgres_worker_database.lend()
    asyncio.run(_account_made(url))
    assert asyncio.run(_run(url, COUNT_ACCOUNTS)) == 1  # the row is there until given back

    postgres_worker_database.take_back()

    assert postgres_worker_database.lend() == url  # the same database, emptied
    assert asyncio.run(_run(url, COUNT_ACCOUNTS)) == 0
    postgres_worker_database.take_back()


def test_a_database_whose_tables_a_test_changed_is_cloned_anew(
    postgres_worker_database: WorkerDatabase,
) -> None:
    url = postgres_worker_database.lend()
    asyncio.run(_run(url, "CREATE TABLE made_by_a_test (id int)"))

    postgres_worker_database.take_back()

    fresh = postgres_worker_database.lend()
    assert fresh != url
    tables = "SELECT count(*) FROM pg_tables WHERE tablename = 'made_by_a_test'"
    assert asyncio.run(_run(fresh, tables)) == 0
    assert asyncio.run(_run(fresh, COUNT_ACCOUNTS)) == 0  # and migrated, as the template
    postgres_worker_database.take_back()
