"""The databases tests run on: a migrated SQLite file copied per test, and on PostgreSQL a
migrated template each worker clones once, then empties after each test it lends it to."""

import asyncio
import contextlib
import functools
import os
import uuid
from collections.abc import Iterator

import asyncpg
from alembic.script import ScriptDirectory
from sqlalchemy.engine import make_url

from app.storage.db import alembic_config, create_engine, migrate
from app.storage.models import Base

PG_URL_ENV = "AUTOPROVISION_TEST_DATABASE_URL"


def pg_base_url() -> str | None:
    return os.environ.get(PG_URL_ENV) or None


def with_database(url: str, database: str) -> str:
    return make_url(url).set(database=database).render_as_string(hide_password=False)


async def pg_admin(url: str, sql: str) -> None:
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


async def migrated(url: str) -> None:
    engine = create_engine(url)
    try:
        await migrate(engine)
    finally:
        await engine.dispose()


@contextlib.contextmanager
def pg_database(prefix: str, template: str | None = None) -> Iterator[tuple[str, str]]:
    """A new PostgreSQL database (a copy of `template`, if given), dropped afterwards: its name
    and URL."""
    base = pg_base_url()
    assert base is not None
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    copied = "" if template is None else f' TEMPLATE "{template}"'
    asyncio.run(pg_admin(base, f'CREATE DATABASE "{name}"{copied}'))
    try:
        yield name, with_database(base, name)
    finally:
        asyncio.run(pg_admin(base, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


class WorkerDatabase:
    """This worker's PostgreSQL database, cloned from the template and emptied after each test:
    a clone of its own per test cost about a second (CREATE and DROP DATABASE wait on disk)."""

    def __init__(self, template: str) -> None:
        self.template = template
        self.made: contextlib.ExitStack | None = None
        self.url = ""

    def lend(self) -> str:
        """The database for the next test: the one emptied after the last, or a new clone."""
        if self.made is None:
            self.made = contextlib.ExitStack()
            _name, self.url = self.made.enter_context(pg_database("ap_test", self.template))
        return self.url

    def take_back(self) -> None:
        """Empty it for the next test; a test that changed its schema (or left it locked)
        leaves it to be dropped and cloned anew."""
        if not asyncio.run(_emptied(self.url)):
            self.close()

    def close(self) -> None:
        if self.made is not None:
            self.made.close()
            self.made = None


async def _emptied(url: str) -> bool:
    """Delete every row but the schema's version (children first) and restart the sequences:
    whether that left the database as the template was."""
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute("SET lock_timeout = '5s'")
        await connection.execute(  # what the test left connected goes, as DROP ... FORCE would
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        version = await connection.fetchval("SELECT version_num FROM alembic_version")
        tables = {
            r[0]
            for r in await connection.fetch(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            )
        }
        if version != _head_revision() or tables != _APP_TABLES | {"alembic_version"}:
            return False
        sequences = await connection.fetch(
            "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'"
        )
        async with connection.transaction():
            for table in reversed(Base.metadata.sorted_tables):
                await connection.execute(f'DELETE FROM "{table.name}"')
            for (sequence,) in sequences:
                await connection.execute(f'ALTER SEQUENCE "{sequence}" RESTART')
        return True
    except (asyncpg.PostgresError, asyncpg.InterfaceError):
        return False
    finally:
        await connection.close()


_APP_TABLES = frozenset(Base.metadata.tables)


@functools.cache
def _head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config("")).get_current_head()
    assert head is not None
    return head
