"""Whole write transactions in one hop to the database's thread, for the deploy path.

aiosqlite runs every statement in its own thread and hands each result back through the event
loop: a claim of eight statements (BEGIN, the order, the account, the hold, the ledger entry,
the attempt, the timeline line, COMMIT) waits eight times for a loop that is also parsing other
providers' reads, and each wait is as long as whatever holds the loop then. Here the whole
transaction is one synchronous function of a `Connection`; on an SQLite file it runs on a
connection of its own, in a thread of its own, and the loop is waited for once. Elsewhere
(PostgreSQL: asyncpg has no thread to hop to) the same function runs on the session's
connection through `run_sync`.
"""

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.storage.db import configure_sqlite, session_scope, write_turn

T = TypeVar("T")


class OneHopWriter:
    """Runs `work(connection)` as one transaction: committed if it returns, rolled back if it
    raises. On SQLite it waits its turn among the process's writers, ahead of every other kind
    of writer (it is for the claims, whose creates wait on it)."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self.sessionmaker = sessionmaker
        self._engine: Engine | None = None
        self._thread: ThreadPoolExecutor | None = None
        bind = sessionmaker.kw.get("bind")
        if isinstance(bind, AsyncEngine) and _is_sqlite_file(bind):
            url = bind.url.set(drivername="sqlite")
            # One thread uses the one connection; it may be closed from another at shutdown.
            self._engine = create_engine(
                url, pool_size=1, max_overflow=0, connect_args={"check_same_thread": False}
            )
            configure_sqlite(self._engine)
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="one-hop writer")

    @property
    def threaded(self) -> bool:
        """Whether transactions run on a connection and thread of their own."""
        return self._engine is not None

    async def run(self, work: Callable[[Connection], T]) -> T:
        """Run `work` in one transaction and return what it returns."""
        if self._engine is None or self._thread is None:
            async with session_scope(self.sessionmaker) as session:
                connection = await session.connection()
                return await connection.run_sync(work)
        async with write_turn(self.sessionmaker, claim=True):
            done = asyncio.get_running_loop().run_in_executor(self._thread, self._transaction, work)
            try:
                return await asyncio.shield(done)
            except asyncio.CancelledError:
                # The thread commits or rolls back regardless: keep the turn until it has, or
                # the next writer would find SQLite's lock still held.
                with contextlib.suppress(Exception):
                    await done
                raise

    def _transaction(self, work: Callable[[Connection], T]) -> T:
        assert self._engine is not None
        with self._engine.begin() as connection:
            return work(connection)

    def close(self) -> None:
        """Close the connection and stop the thread (waits for a transaction in it)."""
        if self._thread is not None and self._engine is not None:
            self._thread.submit(self._engine.dispose).result()
            self._thread.shutdown(wait=True)
            self._thread = None
            self._engine = None


def _is_sqlite_file(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:")
