"""Engine, sessions and migrations for SQLite (default) and PostgreSQL."""

import asyncio
import contextlib
import fcntl
import weakref
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, event, text
from sqlalchemy.engine import ExceptionContext, make_url
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000
MIGRATION_LOCK_ID = (
    7_245_310_001  # pg_advisory_lock key: replicas starting together migrate in turn
)


def create_engine(database_url: str, **kwargs: Any) -> AsyncEngine:
    """An async engine; on SQLite, with WAL, a busy timeout and write-ready transactions."""
    if not database_url.startswith("sqlite"):
        return create_async_engine(database_url, pool_pre_ping=True, **kwargs)
    engine = create_async_engine(database_url, **kwargs)
    configure_sqlite(engine.sync_engine)
    return engine


def configure_sqlite(engine: Engine) -> None:
    """WAL, the busy timeout, foreign keys, and BEGIN IMMEDIATE for writers (see below)."""

    # Python's sqlite3 opens transactions lazily and only before writes, so a transaction that
    # read first and writes later can fail with SQLITE_BUSY_SNAPSHOT instead of waiting. Taking
    # control of BEGIN (SQLAlchemy's documented recipe) and beginning IMMEDIATE makes writers
    # queue on busy_timeout; read-only sessions opt into a plain deferred BEGIN.
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get("sqlite_begin", "IMMEDIATE")
        connection.exec_driver_sql(f"BEGIN {mode}")

    event.listen(engine, "handle_error", cancelled_statement_rolls_back)


def cancelled_statement_rolls_back(context: ExceptionContext) -> None:
    """A statement cancelled in flight (a task stopped mid-transaction) leaves the connection
    to be rolled back, not hard-closed.

    SQLAlchemy treats a cancellation as a lost connection and closes it at once, leaving its
    cursor unclosed. SQLite then keeps the connection open, its transaction too, for as long
    as that cursor lives: a writer's lock stays held and every other writer waits out
    busy_timeout and fails ("database is locked"). aiosqlite runs a connection's calls in
    order on its own thread, so the connection is still sound: the statement finishes, then
    the session's rollback runs after it and releases the lock.
    """
    if isinstance(context.original_exception, asyncio.CancelledError):
        context.is_disconnect = False


class WriteGate:
    """One writer at a time, handed from one to the next: claims first, then the other
    background writers (urgent), then requests.

    SQLite takes one writer at a time. Writers of this process queue here instead of on SQLite's
    busy handler, which sleeps in growing steps (1, 2, 5, 10 ... 100 ms): a writer that has
    waited a while sleeps 100 ms between tries while newcomers polling every millisecond take
    the lock first, so a few writers can wait for seconds. Here the gate passes straight to
    the next waiter, first-come first-served within each kind. A claim (stock was just seen:
    its create waits on it) never waits behind a queued writer, only behind the one writing.
    """

    def __init__(self) -> None:
        self._held = False
        self._claims: deque[asyncio.Future[None]] = deque()
        self._urgent: deque[asyncio.Future[None]] = deque()
        self._others: deque[asyncio.Future[None]] = deque()
        self._lines = (self._claims, self._urgent, self._others)

    @property
    def waiting(self) -> int:
        """How many writers wait for their turn."""
        return sum(not t.done() for line in self._lines for t in line)

    @asynccontextmanager
    async def turn(self, *, urgent: bool, claim: bool = False) -> AsyncIterator[None]:
        """Hold the gate for the block; `claim` waiters are let in first, then `urgent` ones,
        then all others."""
        await self._acquire(self._claims if claim else self._urgent if urgent else self._others)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, line: deque[asyncio.Future[None]]) -> None:
        if not self._held and not any(self._lines):
            self._held = True
            return
        ticket = asyncio.get_running_loop().create_future()
        line.append(ticket)
        try:
            await ticket
        except BaseException:
            if ticket.done() and not ticket.cancelled():
                self._release()  # handed the gate just as it was cancelled: pass it on
            else:
                # A release may already have dropped the cancelled ticket from the line;
                # raising here would turn the cancellation into an error the caller survives.
                with contextlib.suppress(ValueError):
                    line.remove(ticket)
            raise

    def _release(self) -> None:
        # The gate stays held while it passes to the next waiter, so no newcomer slips in.
        for line in self._lines:
            while line:
                ticket = line.popleft()
                if not ticket.done():
                    ticket.set_result(None)
                    return
        self._held = False


_write_gates: "weakref.WeakKeyDictionary[Engine, WriteGate]" = weakref.WeakKeyDictionary()
_GATE = "write_gate"
_URGENT = "write_gate_urgent"


def create_sessionmaker(
    engine: AsyncEngine, *, requests: bool = False
) -> async_sessionmaker[AsyncSession]:
    """Sessions that write: on SQLite each waits its turn among this process's writers.

    `requests=True` is for request handlers: their writers wait behind the background jobs'
    (the watcher's claims above all), never in front of them, and in arrival order among
    themselves.
    """
    info: dict[str, Any] = {}
    if engine.dialect.name == "sqlite":
        info[_GATE] = _write_gates.setdefault(engine.sync_engine, WriteGate())
        info[_URGENT] = not requests
    return async_sessionmaker(engine, expire_on_commit=False, autoflush=False, info=info)


def create_read_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that only read: on SQLite they never wait for the write lock."""
    reader = engine.execution_options(sqlite_begin="DEFERRED")
    return async_sessionmaker(reader, expire_on_commit=False, autoflush=False)


@asynccontextmanager
async def session_scope(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> AsyncIterator[AsyncSession]:
    """One unit of work: commits if the caller finishes, rolls back if it raises.

    On SQLite a writing session first waits its turn among this process's writers, and holds
    it until its transaction has ended (SQLite's write lock is held for as long).
    """
    async with write_turn(sessionmaker), sessionmaker() as session:
        try:
            yield session
            await session.commit()
        except BaseException:
            await session.rollback()
            raise


def write_turn(
    sessionmaker: async_sessionmaker[AsyncSession], *, claim: bool = False
) -> contextlib.AbstractAsyncContextManager[None]:
    """This writer's turn among the process's writers on SQLite (hold it for the whole
    transaction; `claim`: ahead of every other kind); nothing to wait for elsewhere."""
    info = sessionmaker.kw.get("info") or {}
    gate: WriteGate | None = info.get(_GATE)
    if gate is None:
        return contextlib.nullcontext()
    return gate.turn(urgent=info[_URGENT], claim=claim)


async def ping(sessionmaker: async_sessionmaker[AsyncSession]) -> None:
    """One round trip to the database; raises if it does not answer."""
    async with sessionmaker() as session:
        await session.execute(text("SELECT 1"))


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
            async with foreign_keys_checked_after(connection):
                await connection.run_sync(
                    _upgrade, engine.url.render_as_string(hide_password=False)
                )
                await connection.commit()
        finally:
            if engine.dialect.name == "postgresql":
                await connection.execute(text(f"SELECT pg_advisory_unlock({MIGRATION_LOCK_ID})"))
                await connection.commit()


async def schema_revision(engine: AsyncEngine) -> tuple[str | None, str | None, bool]:
    """(the database's revision, the newest migration's, whether ours know the database's).

    Reads only: nothing is migrated.
    """
    script = ScriptDirectory.from_config(alembic_config(engine.url.render_as_string()))
    async with engine.connect() as connection:
        current = await connection.run_sync(
            lambda sync: MigrationContext.configure(sync).get_current_revision()
        )
    try:
        known = current is None or script.get_revision(current) is not None
    except CommandError:  # a revision none of our migrations has: newer code ran here
        known = False
    return current, script.get_current_head(), known


class ForeignKeysBroken(RuntimeError):
    """A migration left rows that refer to rows that do not exist."""


@asynccontextmanager
async def foreign_keys_checked_after(connection: AsyncConnection) -> AsyncIterator[None]:
    """On SQLite: foreign keys off for the block (migrations), then checked and back on.

    SQLite changes a table (adding a CHECK, say) by copying it, dropping the old one and
    renaming the copy; with foreign keys on, the drop fails while rows refer to the table, and
    deferring the check does not help. SQLite's own recipe: keys off outside any transaction,
    the change, then `PRAGMA foreign_key_check`. Elsewhere the block just runs.
    """
    if connection.dialect.name != "sqlite":
        yield
        return
    await connection.run_sync(_sqlite_foreign_keys, "OFF")
    try:
        yield
        broken = (await connection.exec_driver_sql("PRAGMA foreign_key_check")).all()
        await connection.commit()
        if broken:
            raise ForeignKeysBroken(f"rows refer to rows that do not exist: {broken[:5]}")
    finally:
        await connection.run_sync(_sqlite_foreign_keys, "ON")


def _sqlite_foreign_keys(connection: Connection, state: str) -> None:
    # Straight to the driver: through SQLAlchemy the statement would open a transaction first,
    # and inside one SQLite ignores this pragma.
    cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(f"PRAGMA foreign_keys={state}")
    finally:
        cursor.close()


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
