"""What runs next to the API: the watcher, and in demo mode the simulators and the demo feed."""

import asyncio
import logging

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db import session_scope
from app.demo import (
    EmbeddedSimulators,
    StockFeed,
    announce_demo,
    prepare_demo_account,
    simulator_settings,
)
from app.providers.registry import build_adapters
from app.settings import Settings
from app.watcher.watcher import Watcher

log = logging.getLogger(__name__)


LIVE_WITHOUT_CREDENTIALS = (
    "live mode needs credentials for at least one provider: set AUTOPROVISION_VERDA_CLIENT_ID "
    "and _SECRET, AUTOPROVISION_HYPERSTACK_API_KEY or AUTOPROVISION_QUANTACLOUD_API_KEY "
    "(or AUTOPROVISION_MODE=demo)"
)


class ConfigurationError(RuntimeError):
    """The settings cannot work (e.g. live mode without any provider credentials)."""


class Background:
    """Starts and stops the background parts in the right order."""

    def __init__(
        self,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        read_sessionmaker: async_sessionmaker[AsyncSession],
    ) -> None:
        self.settings = settings
        self.sessionmaker = sessionmaker
        self.read_sessionmaker = read_sessionmaker
        self.simulators: EmbeddedSimulators | None = None
        self.feed: asyncio.Task[None] | None = None
        self.client: httpx.AsyncClient | None = None
        self.watcher: Watcher | None = None

    async def start(self) -> None:
        """Simulators first (demo), then the demo account, then the watcher."""
        settings = self.settings
        if not settings.watcher:
            return
        if settings.mode == "demo":
            if settings.sim_embedded:
                self.simulators = EmbeddedSimulators(settings.sim_port)
                await self.simulators.start()
            providers = simulator_settings(settings)
            async with session_scope(self.sessionmaker) as session:
                api_key = await prepare_demo_account(session, with_orders=settings.demo_feed)
            announce_demo(api_key, settings)
            if settings.demo_feed:
                feed = StockFeed(f"http://127.0.0.1:{settings.sim_port}")
                self.feed = asyncio.create_task(feed.run(), name="demo stock feed")
        else:
            providers = settings
        self.client = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
            trust_env=False,
        )
        adapters = build_adapters(providers, self.client)
        if not adapters:
            raise ConfigurationError(LIVE_WITHOUT_CREDENTIALS)
        self.watcher = Watcher(
            settings=settings,
            adapters=adapters,
            sessionmaker=self.sessionmaker,
            read_sessionmaker=self.read_sessionmaker,
        )
        await self.watcher.start()

    async def stop(self) -> None:
        """The reverse of start; creates in flight get a bounded time to finish."""
        if self.feed is not None:
            self.feed.cancel()
        if self.watcher is not None:
            await self.watcher.stop()
        if self.client is not None:
            await self.client.aclose()
        if self.simulators is not None:
            await self.simulators.stop()
