"""What runs next to the API: the watcher (on the lease holder only), the periodic jobs, and
in demo mode the simulators and the demo feed."""

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.catalogue import Provider
from app.core.clock import utcnow
from app.demo.mode import (
    DEMO_KEEP_SECONDS,
    EmbeddedSimulators,
    StockFeed,
    announce_demo,
    prepare_demo_account,
    simulator_state_path,
)
from app.providers.base import ProviderAdapter
from app.providers.http import provider_tls
from app.providers.registry import build_adapters, credentials_hint, simulated
from app.services import idempotency, leases, orders, published_events, retention
from app.services.webhooks import outbox
from app.settings import Settings
from app.storage.db import session_scope
from app.support.metrics import LEADER
from app.support.schedule import PeriodicJob, Schedule
from app.support.secrets import SecretBoxLoader
from app.watcher.watcher import Watcher
from app.webhooks.dispatcher import Dispatcher

log = logging.getLogger(__name__)
WATCHER_LEASE = "watcher"
# Clients (each its own connection pool) the provider requests share: reads take them in turn,
# so a read in flight and two creates sent at once each find a connection already open.
PROVIDER_LANES = 3
# An idle connection is dropped before servers commonly drop it (uvicorn: 5 s): one reused just
# as the server closes it fails the request, and a create that fails so is an unclear create.
KEEPALIVE_SECONDS = 4.0
LIVE_WITHOUT_CREDENTIALS = (
    f"live mode needs credentials for at least one provider: set {credentials_hint()} "
    "(or AUTOPROVISION_MODE=demo)"
)


class ConfigurationError(RuntimeError):
    """The settings cannot work (e.g. live mode without any provider credentials)."""


class Background:
    """Starts and stops the background parts; runs the watcher only while holding the lease.

    Every replica with `watcher` on competes for one lease in the database; the holder renews
    it every third of its time to live and runs the watcher. When the holder dies, the lease
    runs out and another replica takes over within one time to live plus one renewal.
    """

    def __init__(
        self,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        read_sessionmaker: async_sessionmaker[AsyncSession],
        secret_boxes: SecretBoxLoader,
        schedule: Schedule,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.settings = settings
        self.schedule = schedule  # the process's one scheduler: the watcher's jobs join it
        self.secret_boxes = secret_boxes
        self.sessionmaker = sessionmaker
        self.read_sessionmaker = read_sessionmaker
        self.clock = clock  # the wall clock of lease expiry, and of the watcher it starts
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.simulators: EmbeddedSimulators | None = None
        self.feed: asyncio.Task[None] | None = None
        self.demo_keeper: asyncio.Task[None] | None = None
        self.leadership: asyncio.Task[None] | None = None
        self.clients: list[httpx.AsyncClient] = []
        self.adapters: dict[Provider, ProviderAdapter] = {}
        self.watcher: Watcher | None = None
        self.dispatcher: Dispatcher | None = None

    async def start(self) -> None:
        """Simulators first (demo), then the demo account, then the bid for the lease."""
        settings = self.settings
        if not settings.watcher:
            return
        if settings.mode == "demo":
            if settings.sim_embedded:
                self.simulators = EmbeddedSimulators(
                    settings.sim_port, simulator_state_path(settings.database_url)
                )
                await self.simulators.start()
            providers = simulated(settings, settings.sim_url)
            async with session_scope(self.sessionmaker) as session:
                api_key = await prepare_demo_account(
                    session,
                    secret_box=self.secret_boxes.get(),
                    with_orders=settings.demo_feed,
                    max_waiting=settings.max_waiting_orders_per_account,
                )
            announce_demo(api_key, settings)
            if settings.demo_feed:
                self.demo_keeper = asyncio.create_task(self._keep_demo(), name="demo keeper")
            if settings.demo_feed:
                feed = StockFeed(
                    settings.sim_url,
                    verify=provider_tls(settings.provider_ca_file),
                    hour_seconds=settings.billing_hour_seconds,
                    wanted=self._waiting_shapes,
                )
                self.feed = asyncio.create_task(feed.run(), name="demo stock feed")
        else:
            providers = settings
        verify = provider_tls(settings.provider_ca_file)
        self.clients = [
            httpx.AsyncClient(
                limits=httpx.Limits(
                    max_connections=100,
                    max_keepalive_connections=20,
                    keepalive_expiry=KEEPALIVE_SECONDS,
                ),
                trust_env=False,
                verify=verify,
            )
            for _ in range(PROVIDER_LANES)
        ]
        self.adapters = build_adapters(providers, self.clients)
        if not self.adapters:
            raise ConfigurationError(LIVE_WITHOUT_CREDENTIALS)
        await self._lead_once()  # a lone process starts watching at once
        self.leadership = asyncio.create_task(self._keep_leading(), name="leadership")

    async def _keep_demo(self) -> None:
        """Demo mode, on the lease holder: the demo account topped up when low, and each demo
        order placed again once no copy of it is open."""
        while True:
            await asyncio.sleep(DEMO_KEEP_SECONDS)
            if self.watcher is None:
                continue
            try:
                async with session_scope(self.sessionmaker) as session:
                    await prepare_demo_account(
                        session,
                        secret_box=self.secret_boxes.get(),
                        with_orders=True,
                        max_waiting=self.settings.max_waiting_orders_per_account,
                    )
            except Exception:
                log.exception("demo keeper: could not top up or place the demo orders")

    async def _waiting_shapes(self) -> list[dict[str, Any]]:
        async with session_scope(self.read_sessionmaker) as session:
            return await orders.waiting_shapes(session)

    async def _keep_leading(self) -> None:
        while True:
            await asyncio.sleep(self.settings.leader_lease_seconds / 3)
            await self._lead_once()

    async def _lead_once(self) -> None:
        """Take or renew the lease; start the watcher on winning it, stop it on losing it."""
        try:
            async with session_scope(self.sessionmaker) as session:
                held = await leases.acquire(
                    session,
                    name=WATCHER_LEASE,
                    holder=self.holder,
                    ttl=self.settings.leader_lease_seconds,
                    now=self.clock(),
                    # On SQLite the file lock makes this the only process: a lease left by a
                    # killed predecessor need not run out first.
                    force=self.settings.is_sqlite,
                )
        except Exception:
            log.exception("could not renew the watcher lease: stepping down")
            held = False
        if held and self.watcher is None:
            log.info("%s holds the watcher lease: watching", self.holder)
            watcher = Watcher(
                settings=self.settings,
                adapters=self.adapters,
                sessionmaker=self.sessionmaker,
                read_sessionmaker=self.read_sessionmaker,
                wall_clock=self.clock,
                secret_boxes=self.secret_boxes,
                schedule=self.schedule,
            )
            await watcher.start()
            self.watcher = watcher
            dispatcher = Dispatcher(
                settings=self.settings,
                sessionmaker=self.sessionmaker,
                read_sessionmaker=self.read_sessionmaker,
                secret_boxes=self.secret_boxes,
            )
            await dispatcher.start()
            self.dispatcher = dispatcher
            LEADER.set(1)
        elif not held and self.watcher is not None:
            log.warning("%s lost the watcher lease: stopping the watcher", self.holder)
            watcher, self.watcher = self.watcher, None
            LEADER.set(0)
            await asyncio.gather(self._stop_dispatcher(), watcher.stop())

    async def _stop_dispatcher(self) -> None:
        if self.dispatcher is not None:
            dispatcher, self.dispatcher = self.dispatcher, None
            await dispatcher.stop()

    async def stop(self) -> None:
        """The reverse of start: creates in flight get a bounded time to finish, then the lease
        is given up so another replica can take over at once."""
        if self.leadership is not None:
            self.leadership.cancel()
        for task in (self.feed, self.demo_keeper):
            if task is not None:
                task.cancel()
        if self.watcher is None:
            await self._stop_dispatcher()
        else:
            await asyncio.gather(self._stop_dispatcher(), self.watcher.stop())
            self.watcher = None
            LEADER.set(0)
            try:
                async with session_scope(self.sessionmaker) as session:
                    await leases.release(
                        session, name=WATCHER_LEASE, holder=self.holder, now=self.clock()
                    )
            except Exception:
                log.exception("could not release the watcher lease; it expires by itself")
        for client in self.clients:
            await client.aclose()
        self.clients = []
        if self.simulators is not None:
            await self.simulators.stop()


# Periodic jobs: only their registration lives here; each calls one service function.
PRUNE_IDEMPOTENCY_KEYS_SECONDS = 3600
PRUNE_WEBHOOK_EVENTS_SECONDS = 3600
PRUNE_ENDED_ORDERS_SECONDS = 3600
WEBHOOK_HISTORY_DAYS = 30
EVENT_HISTORY_DAYS = 30


async def prune_idempotency_keys(sessionmaker: async_sessionmaker[AsyncSession]) -> int:
    """Delete Idempotency-Key records older than 24 hours."""
    async with session_scope(sessionmaker) as session:
        pruned = await idempotency.prune_expired(session, now=utcnow())
    if pruned:
        log.info("pruned %d expired idempotency keys", pruned)
    return pruned


async def prune_webhook_events(sessionmaker: async_sessionmaker[AsyncSession]) -> int:
    """Delete delivered (or given-up) webhook events older than 30 days, with their attempts."""
    async with session_scope(sessionmaker) as session:
        pruned = await outbox.prune(
            session, older_than=utcnow() - timedelta(days=WEBHOOK_HISTORY_DAYS)
        )
    if pruned:
        log.info("pruned %d webhook events older than %d days", pruned, WEBHOOK_HISTORY_DAYS)
    return pruned


async def prune_published_events(sessionmaker: async_sessionmaker[AsyncSession]) -> int:
    """Delete stream events published more than 30 days ago (the timelines keep their lines)."""
    async with session_scope(sessionmaker) as session:
        pruned = await published_events.prune(
            session, older_than=utcnow() - timedelta(days=EVENT_HISTORY_DAYS)
        )
    if pruned:
        log.info("pruned %d stream events older than %d days", pruned, EVENT_HISTORY_DAYS)
    return pruned


async def prune_ended_orders(
    sessionmaker: async_sessionmaker[AsyncSession],
    *,
    retention_days: int,
    batch: int = retention.PRUNE_BATCH,
) -> int:
    """Prune orders that ended more than `retention_days` ago (the ledger keeps what it names),
    a batch per transaction, so the single writer of SQLite is never held for long."""
    pruned = 0
    while True:
        now = utcnow()
        async with session_scope(sessionmaker) as session:
            done = await retention.prune_ended_orders(
                session, ended_before=now - timedelta(days=retention_days), now=now, limit=batch
            )
        pruned += done.total
        if done.total < batch:
            break
    if pruned:
        log.info("pruned %d orders ended more than %d days ago", pruned, retention_days)
    return pruned


def replica_jobs(
    sessionmaker: async_sessionmaker[AsyncSession], *, order_retention_days: int
) -> list[PeriodicJob]:
    """The housekeeping every replica runs, each job one service call (the watcher's jobs,
    on the lease holder only, are `Watcher.jobs`)."""
    return [
        PeriodicJob(
            "prune idempotency keys",
            PRUNE_IDEMPOTENCY_KEYS_SECONDS,
            partial(prune_idempotency_keys, sessionmaker),
            at_once=False,
        ),
        PeriodicJob(
            "prune webhook events",
            PRUNE_WEBHOOK_EVENTS_SECONDS,
            partial(prune_webhook_events, sessionmaker),
            at_once=False,
        ),
        PeriodicJob(
            "prune stream events",
            PRUNE_WEBHOOK_EVENTS_SECONDS,
            partial(prune_published_events, sessionmaker),
            at_once=False,
        ),
        PeriodicJob(
            "prune ended orders",
            PRUNE_ENDED_ORDERS_SECONDS,
            partial(prune_ended_orders, sessionmaker, retention_days=order_retention_days),
            at_once=False,
        ),
    ]
