"""What the server commands do, apart from how they are spelled on the command line: each
imports the server's modules itself, so `autoprovision --help` imports none of them."""

from __future__ import annotations

import asyncio
import errno
import socket
import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from app.settings import Settings


def serve(settings: Settings) -> int:
    from app.storage.db import DatabaseInUse, lock_sqlite_file

    # Before anything is printed or migrated: a second process on the same SQLite file says
    # so in one line and stops, instead of announcing itself and failing in its lifespan.
    try:
        sqlite_lock = lock_sqlite_file(settings.database_url)
    except DatabaseInUse as exc:
        sys.stderr.write(f"autoprovision: {exc}\n")
        return 1
    try:
        # The port too: a busy one must not spend the one-time admin key on a start that fails.
        try:
            listening = listen(settings.host, settings.port)
        except OSError as exc:
            sys.stderr.write(
                f"autoprovision: cannot listen on {settings.host}:{settings.port}: "
                f"{why_not(exc)} (stop what holds it, or choose another port with --port "
                "or AUTOPROVISION_PORT)\n"
            )
            return 1
        with listening:
            serve_holding(settings, sqlite_lock, listening)
    finally:
        if sqlite_lock is not None:
            sqlite_lock.close()
    return 0


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to `host`:`port`, as uvicorn binds one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
    except OSError:
        listening.close()
        raise
    return listening


def why_not(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "the address is in use"
    return exc.strerror or str(exc)


def serve_holding(settings: Settings, sqlite_lock: TextIO | None, listening: socket.socket) -> None:
    import uvicorn

    from app.api.connections import guarded_protocol
    from app.main import announce_admin_key, create_app

    new_admin_key = asyncio.run(prepare(settings))
    shown_host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    url = f"http://{shown_host}:{settings.port}"
    sys.stdout.write(f"\n  autoprovision listening on {url}  (API docs: {url}/docs)\n")
    sys.stdout.write(f"  Dashboard: {url}/  (sign in with an account's API key)\n")
    if shown_host != settings.host:
        sys.stdout.write(f"  (bound to {settings.host}: every interface of this machine)\n")
    sys.stdout.write(f"  database: {redacted(settings.database_url)}\n")
    if new_admin_key is not None:
        announce_admin_key(new_admin_key)
    elif settings.admin_api_key is not None:
        sys.stdout.write("  Admin API key: the one set in AUTOPROVISION_ADMIN_API_KEY\n\n")
    else:
        sys.stdout.write(
            "  Admin API key: generated at first start and shown then; "
            "`autoprovision admin-key --reset` makes a new one.\n\n"
        )
    sys.stdout.flush()
    # Uvicorn binds the port itself once the app has started (it says where it runs, and stops
    # cleanly on Ctrl+C): held until here, the port is lost only to a process that takes it then.
    listening.close()
    uvicorn.run(
        create_app(settings, sqlite_lock=sqlite_lock),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        proxy_headers=False,
        http=guarded_protocol(
            head_timeout_seconds=settings.request_timeout_seconds,
            max_per_client=settings.max_connections_per_client,
        ),
    )


def redacted(database_url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(database_url).render_as_string(hide_password=True)


async def prepare(settings: Settings) -> str | None:
    from app.main import prepare_database
    from app.storage.db import create_engine

    engine = create_engine(settings.database_url)
    try:
        return await prepare_database(engine, settings)
    finally:
        await engine.dispose()


async def migrate_database(settings: Settings) -> None:
    from app.storage.db import create_engine, migrate

    engine = create_engine(settings.database_url)
    try:
        await migrate(engine)
    finally:
        await engine.dispose()


async def reset_admin_key(settings: Settings) -> str:
    from app.services.accounts import reset_admin_key
    from app.storage.db import create_engine, create_sessionmaker, migrate, session_scope

    engine = create_engine(settings.database_url)
    try:
        await migrate(engine)
        async with session_scope(create_sessionmaker(engine)) as session:
            api_key = await reset_admin_key(session)
    finally:
        await engine.dispose()
    return api_key


async def check(
    settings: Settings, *, as_json: bool, demo: bool, sim_url: str | None, timeout: float | None
) -> int:
    from app import doctor

    timeout = timeout or settings.provider_timeout_seconds
    if demo or sim_url or settings.mode == "demo":
        checks = await doctor.check_demo(settings, sim_url=sim_url, timeout=timeout)
    else:
        checks = await doctor.run(settings, timeout=timeout)
    render = doctor.render_json if as_json else doctor.render_text
    sys.stdout.write(render(checks) + ("\n" if as_json else ""))
    return 0 if doctor.passed(checks) else 1


async def add_demo_history(
    settings: Settings, *, days: float, seed: int | None, replace: bool
) -> int:
    from app.core.market import Fees
    from app.demo.history import AlreadyGenerated, write_demo_history
    from app.providers.registry import poll_periods
    from app.storage.db import create_engine, create_sessionmaker, migrate

    engine = create_engine(settings.database_url)
    try:
        await migrate(engine)
        made, deleted = await write_demo_history(
            create_sessionmaker(engine),
            days=days,
            fees=Fees(settings.fee_percent, settings.fee_flat_per_hour),
            periods={str(p): s for p, s in poll_periods(settings).items()},
            seed=seed,
            replace=replace,
        )
    except AlreadyGenerated as exc:
        sys.stderr.write(f"autoprovision: {exc}\n")
        return 1
    finally:
        await engine.dispose()
    if any(deleted):
        sys.stdout.write(
            f"deleted {deleted[0]} generated intervals and {deleted[1]} coverage windows\n"
        )
    providers = sorted({w.provider for w in made.windows})
    sys.stdout.write(
        f"wrote {len(made.intervals)} generated intervals and {len(made.windows)} coverage "
        f"windows for {', '.join(providers)} from {made.since:%Y-%m-%d %H:%M} to "
        f"{made.until:%Y-%m-%d %H:%M} UTC (marked generated) into "
        f"{redacted(settings.database_url)}\n"
    )
    return 0
