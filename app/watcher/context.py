"""What every part of the watcher is handed: the providers' adapters, the session makers and
the clock, built once by `watcher.py` (and by a test that drives one part alone)."""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.catalogue import Provider
from app.core.clock import utcnow
from app.providers.base import ProviderAdapter


@dataclass(frozen=True)
class WatcherContext:
    # Only the providers this process has credentials for: a machine at another waits for a
    # process that has them.
    adapters: dict[Provider, ProviderAdapter]
    sessionmaker: async_sessionmaker[AsyncSession]
    # Reads that must not wait behind the writer (SQLite) or hold a write connection.
    read_sessionmaker: async_sessionmaker[AsyncSession]
    clock: Callable[[], datetime] = utcnow
