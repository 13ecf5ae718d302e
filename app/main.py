"""The FastAPI application: wiring of settings, database, routers and background jobs."""

import contextlib
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TextIO

from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.errors import install_error_handlers
from app.api.limits import InFlightLimit, RequestBody, SendDeadline
from app.api.routes import (
    accounts,
    admin,
    catalogue,
    events,
    health,
    machines,
    metrics,
    offers,
    open_models,
    orders,
    stock,
    webhooks,
)
from app.api.shares import KnownKeys, Places
from app.background import Background, replica_jobs
from app.dashboard import api_description, install_api_docs, install_dashboard
from app.providers.registry import with_provider_settings
from app.services.accounts import ensure_admin_key
from app.settings import Settings, get_settings, models_of
from app.storage.db import (
    create_engine,
    create_read_sessionmaker,
    create_sessionmaker,
    lock_sqlite_file,
    migrate,
    session_scope,
)
from app.stream.hub import Hub
from app.stream.publisher import Publisher
from app.support.schedule import Schedule
from app.support.secrets import SecretBoxLoader

logger = logging.getLogger(__name__)


async def prepare_database(engine: AsyncEngine, settings: Settings) -> str | None:
    """Migrate the database and make sure an admin key exists; returns a newly made admin key."""
    await migrate(engine)
    if settings.admin_api_key is not None:
        return None
    async with session_scope(create_sessionmaker(engine)) as session:
        return await ensure_admin_key(session)


def announce_admin_key(api_key: str) -> None:
    """Show a newly generated admin key on the console, the one time it exists in clear."""
    sys.stdout.write(
        f"\n  Admin API key (shown once, store it now): {api_key}\n"
        "  Lost it? `autoprovision admin-key --reset` makes a new one.\n\n"
    )
    sys.stdout.flush()


def announce_dry_run() -> None:
    """Say on the console, before anything is watched, that no VM will be created."""
    sys.stdout.write(
        "\n  DRY RUN: stock is read and matched as usual, but no create is sent and nothing is"
        "\n  held; each order is told what it would have deployed. Unset AUTOPROVISION_DRY_RUN"
        " to go live.\n\n"
    )
    sys.stdout.flush()


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Open the database (migrating it first), start the jobs; undo it all on shutdown."""
    settings: Settings = app.state.settings
    with contextlib.ExitStack() as held:
        if app.state.sqlite_lock is None:  # else `autoprovision serve` took it already
            sqlite_lock = lock_sqlite_file(settings.database_url)
            if sqlite_lock is not None:
                held.callback(sqlite_lock.close)
        engine = create_engine(
            settings.database_url,
            pool_size=settings.db_pool_size,
            max_overflow=settings.db_max_overflow,
            pool_timeout=settings.db_pool_timeout_seconds,
        )
        try:
            new_admin_key = await prepare_database(engine, settings)
            if new_admin_key is not None:
                announce_admin_key(new_admin_key)
            if settings.dry_run:
                announce_dry_run()
            app.state.engine = engine
            app.state.sessionmaker = create_sessionmaker(engine)
            app.state.request_sessionmaker = create_sessionmaker(engine, requests=True)
            app.state.read_sessionmaker = create_read_sessionmaker(engine)
            app.state.secret_boxes = SecretBoxLoader(settings)
            schedule = Schedule()
            schedule.add(
                "replica",
                replica_jobs(
                    app.state.sessionmaker, order_retention_days=settings.order_retention_days
                ),
            )
            schedule.start()
            app.state.hub = Hub(per_account=settings.stream_max_per_account)
            publisher = Publisher(
                app.state.sessionmaker, app.state.read_sessionmaker, app.state.hub
            )
            await publisher.start()
            background = Background(
                settings,
                app.state.sessionmaker,
                app.state.read_sessionmaker,
                app.state.secret_boxes,
                schedule,
            )
            try:
                await background.start()
                app.state.background = background
                yield
            finally:
                await publisher.stop()
                await background.stop()
                await schedule.shutdown()
        finally:
            await engine.dispose()


def create_app(settings: Settings | None = None, *, sqlite_lock: TextIO | None = None) -> FastAPI:
    """A new application for `settings` (default: from the environment). `sqlite_lock`: the
    SQLite file's lock, when the caller took it already (else the lifespan takes it)."""
    # Each provider's settings are loaded here, once (and refused here if they are wrong).
    settings = with_provider_settings(settings or get_settings())
    docs_url = str(settings.docs_url) if settings.docs_url is not None else None
    app = FastAPI(
        title="autoprovision",
        version="0.1.0",
        summary="Waits for scarce GPU machines and deploys one the moment stock appears.",
        description=api_description(docs_url),
        lifespan=lifespan,
        # Starlette's slash redirect builds its Location from the Host header: a plain 404.
        redirect_slashes=False,
        # /docs is served from the package (install_api_docs), not from a CDN; no ReDoc.
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.open_models = {model.id: model for model in models_of(settings)}
    install_error_handlers(app)
    # Added first, so innermost: the bound counts a request from its body's end to its
    # response's start, and a slow sender or reader holds no place in it.
    app.state.known_keys = KnownKeys()
    app.state.costly_reads = Places(settings.max_costly_reads_in_flight, per_share=1)
    app.add_middleware(
        InFlightLimit,
        limit=settings.max_requests_in_flight,
        per_client=settings.max_requests_in_flight_per_client,
        known_keys=app.state.known_keys,
    )
    app.add_middleware(RequestBody, timeout_seconds=settings.request_timeout_seconds)
    app.add_middleware(SendDeadline, timeout_seconds=settings.response_timeout_seconds)
    app.state.background = None
    app.state.sqlite_lock = sqlite_lock
    for router in (
        health.router,
        metrics.router,
        accounts.admin_router,
        admin.router,
        accounts.account_router,
        orders.router,
        events.router,
        offers.router,
        webhooks.router,
        webhooks.deliveries_router,
        catalogue.router,
        open_models.router,
        stock.router,
        machines.router,
    ):
        app.include_router(router)
    install_dashboard(app)
    install_api_docs(app)
    return app
