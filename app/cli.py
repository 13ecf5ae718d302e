"""The `autoprovision` command: serve, migrate, sim, admin-key, doctor, demo-history run the
service; orders, offers, account and watch talk to a running one over its REST API."""

from __future__ import annotations

import argparse
import asyncio
import errno
import socket
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

# The client commands (app/client) need none of the server: it is imported only where a server
# command runs, so `autoprovision orders list` starts in a tenth of the time.
if TYPE_CHECKING:
    from app.settings import Settings

# The commands that run the service, on this machine, with its settings and database.
SERVER_COMMANDS = {
    "serve": "migrate the database, then serve the API and the dashboard (in demo mode, the "
    "simulated providers too)",
    "migrate": "apply database migrations and exit",
    "sim": "run the three provider simulators on their own",
    "admin-key": "make a new admin API key (--reset) and print it",
    "doctor": "check, reading only, everything a live deploy needs; exit 1 on a failure",
    "demo-history": "demo mode only: add generated stock history for the simulated providers",
}
# The commands that talk to a running service over its REST API (app/client).
CLIENT_COMMANDS = {
    "orders": "place, list, get, cancel or terminate an order, set its limits, or read its events",
    "offers": "what the providers have in stock now, priced with fees",
    "account": "your balance, what is held, what is available and how long it pays your machines",
    "watch": "follow events as they happen; `watch ORDER --until running` waits for its IP",
    "models": "the open models the service knows; `models fit ID`: which machines hold one",
}
DESCRIPTION = "Waits for scarce GPU machines and deploys one the moment matching stock appears."
CLIENT_EPILOG = (
    "`autoprovision COMMAND --help` tells more about each command. The client commands take "
    "--url (or AUTOPROVISION_API_URL; default http://127.0.0.1:8000), --key (or "
    "AUTOPROVISION_API_KEY) and --json for scripts. Exit codes: 0 done, 1 refused or the order "
    "failed, 2 bad input, 3 service unreachable."
)
HELP_WIDTH = 88
PROG = "autoprovision"


def _listing(commands: dict[str, str]) -> str:
    """Commands and their summaries in two columns, for --help."""
    column = max(len(name) for name in {**SERVER_COMMANDS, **CLIENT_COMMANDS}) + 2
    return "\n".join(
        textwrap.fill(
            summary,
            width=HELP_WIDTH - 2,  # argparse indents a group's text by two
            initial_indent=name.ljust(column),
            subsequent_indent=" " * column,
        )
        for name, summary in commands.items()
    )


def build_parser() -> argparse.ArgumentParser:
    """The `autoprovision` command line. Its help lists the server commands and the client
    commands apart (argparse lists subcommands as one group, so the two lists are text); the
    client commands are only named here: `main` hands them to app.client.commands."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage="%(prog)s [-h] COMMAND ...",
        description=DESCRIPTION,
        epilog="\n".join(textwrap.wrap(CLIENT_EPILOG, width=HELP_WIDTH)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument_group(
        "Run the service (on this machine, with its settings and database)",
        _listing(SERVER_COMMANDS),
    )
    parser.add_argument_group(
        "Talk to a running service (over its REST API)", _listing(CLIENT_COMMANDS)
    )
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, help=argparse.SUPPRESS, prog=PROG
    )

    def server_command(name: str) -> argparse.ArgumentParser:
        summary = SERVER_COMMANDS[name]
        return commands.add_parser(
            name, help=summary, description=summary[0].upper() + summary[1:] + "."
        )

    serve = server_command("serve")
    serve.add_argument("--host", help="address to listen on (default: AUTOPROVISION_HOST)")
    serve.add_argument("--port", type=int, help="port to listen on (default: AUTOPROVISION_PORT)")
    serve.add_argument(
        "--dry-run",
        action="store_true",
        help="read and match stock but send no create (default: AUTOPROVISION_DRY_RUN)",
    )
    server_command("migrate")
    sim = server_command("sim")
    sim.add_argument("--host", help="address to listen on (default: AUTOPROVISION_HOST)")
    sim.add_argument("--port", type=int, help="port to listen on (default: AUTOPROVISION_SIM_PORT)")
    sim.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        help="round-trip network latency to add: every byte waits half of it each way, in a "
        "loopback relay (so TLS handshakes pay it too)",
    )
    sim.add_argument(
        "--jitter-ms", type=float, default=0.0, help="up to this much more round trip, at random"
    )
    sim.add_argument(
        "--tls", action="store_true", help="serve HTTPS with a self-signed certificate made now"
    )
    sim.add_argument("--cert-dir", type=Path, help="where --tls writes it (default: a temp dir)")
    admin_key = server_command("admin-key")
    admin_key.add_argument(
        "--reset",
        action="store_true",
        required=True,
        help="replace the admin key with a new one and print it",
    )
    check = server_command("doctor")
    check.add_argument("--json", action="store_true", help="print the checks as JSON")
    check.add_argument(
        "--demo", action="store_true", help="check the simulators, as demo mode uses them"
    )
    check.add_argument("--sim-url", help="the simulators' address (implies --demo)")
    check.add_argument(
        "--timeout",
        type=float,
        help="seconds a provider call may take (default: AUTOPROVISION_PROVIDER_TIMEOUT_SECONDS)",
    )
    history = server_command("demo-history")
    history.add_argument("--days", type=float, default=7, help="how many days back (default: 7)")
    history.add_argument("--seed", type=int, help="random seed, for the same history again")
    history.add_argument(
        "--replace", action="store_true", help="delete earlier generated history first"
    )
    for name, summary in CLIENT_COMMANDS.items():  # listed for --help; main() runs them
        commands.add_parser(name, help=summary, add_help=False)
    return parser


def _serve(settings: Settings) -> int:
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
            listening = _listen(settings.host, settings.port)
        except OSError as exc:
            sys.stderr.write(
                f"autoprovision: cannot listen on {settings.host}:{settings.port}: "
                f"{_why_not(exc)} (stop what holds it, or choose another port with --port "
                "or AUTOPROVISION_PORT)\n"
            )
            return 1
        with listening:
            _serve_holding(settings, sqlite_lock, listening)
    finally:
        if sqlite_lock is not None:
            sqlite_lock.close()
    return 0


def _listen(host: str, port: int) -> socket.socket:
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


def _why_not(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "the address is in use"
    return exc.strerror or str(exc)


def _serve_holding(
    settings: Settings, sqlite_lock: TextIO | None, listening: socket.socket
) -> None:
    import uvicorn

    from app.api.connections import guarded_protocol
    from app.main import announce_admin_key, create_app

    new_admin_key = asyncio.run(_prepare(settings))
    shown_host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    url = f"http://{shown_host}:{settings.port}"
    sys.stdout.write(f"\n  autoprovision listening on {url}  (API docs: {url}/docs)\n")
    sys.stdout.write(f"  Dashboard: {url}/  (sign in with an account's API key)\n")
    if shown_host != settings.host:
        sys.stdout.write(f"  (bound to {settings.host}: every interface of this machine)\n")
    sys.stdout.write(f"  database: {_redacted(settings.database_url)}\n")
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


def _sim(args: argparse.Namespace, settings: Settings) -> int:
    from app.simulators.network import Latency
    from app.simulators.run import default_tls_dir, run_simulators

    if args.latency_ms < 0 or args.jitter_ms < 0:
        sys.stderr.write("autoprovision: --latency-ms and --jitter-ms must be 0 or more\n")
        return 2
    one_way = Latency(args.latency_ms / 2, args.jitter_ms / 2)
    latency = one_way if args.latency_ms or args.jitter_ms else None
    tls_dir = (args.cert_dir or default_tls_dir()) if args.tls else None
    host, port = args.host or settings.host, args.port or settings.sim_port
    run_simulators(host, port, settings.log_level, latency=latency, tls_dir=tls_dir)
    return 0


def _redacted(database_url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(database_url).render_as_string(hide_password=True)


async def _prepare(settings: Settings) -> str | None:
    from app.main import prepare_database
    from app.storage.db import create_engine

    engine = create_engine(settings.database_url)
    try:
        return await prepare_database(engine, settings)
    finally:
        await engine.dispose()


async def _migrate(settings: Settings) -> None:
    from app.storage.db import create_engine, migrate

    engine = create_engine(settings.database_url)
    try:
        await migrate(engine)
    finally:
        await engine.dispose()


async def _reset_admin_key(settings: Settings) -> str:
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


async def _doctor(settings: Settings, args: argparse.Namespace) -> int:
    from app import doctor

    timeout = args.timeout or settings.provider_timeout_seconds
    if args.demo or args.sim_url or settings.mode == "demo":
        checks = await doctor.check_demo(settings, sim_url=args.sim_url, timeout=timeout)
    else:
        checks = await doctor.run(settings, timeout=timeout)
    render = doctor.render_json if args.json else doctor.render_text
    sys.stdout.write(render(checks) + ("\n" if args.json else ""))
    return 0 if doctor.passed(checks) else 1


async def _demo_history(settings: Settings, args: argparse.Namespace) -> int:
    from app.core.market import Fees
    from app.demo.history import AlreadyGenerated, write_demo_history
    from app.providers.registry import poll_periods
    from app.storage.db import create_engine, create_sessionmaker, migrate

    engine = create_engine(settings.database_url)
    try:
        await migrate(engine)
        made, deleted = await write_demo_history(
            create_sessionmaker(engine),
            days=args.days,
            fees=Fees(settings.fee_percent, settings.fee_flat_per_hour),
            periods={str(p): s for p, s in poll_periods(settings).items()},
            seed=args.seed,
            replace=args.replace,
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
        f"{_redacted(settings.database_url)}\n"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `autoprovision` command."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    if not arguments:  # what there is to do, rather than "the argument COMMAND is required"
        build_parser().print_help()
        return 2
    if arguments and arguments[0] in CLIENT_COMMANDS:
        from app.client.commands import run

        return run(arguments)
    return _server_command(arguments)


def _server_command(argv: list[str]) -> int:
    from pydantic import ValidationError

    from app.background import LIVE_WITHOUT_CREDENTIALS
    from app.main import announce_admin_key
    from app.providers.registry import (
        configured_providers,
        variable_name,
        with_provider_settings,
    )
    from app.settings import get_settings

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = with_provider_settings(get_settings())
    except ValidationError as exc:
        for error in exc.errors():
            name = variable_name(error["loc"])
            sys.stderr.write(f"autoprovision: {name}: {error['msg']}\n")
        return 2
    if args.command == "serve":
        if settings.mode == "live" and settings.watcher and not configured_providers(settings):
            sys.stderr.write(f"autoprovision: {LIVE_WITHOUT_CREDENTIALS}\n")
            return 2
        overrides = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
        if args.dry_run:
            overrides["dry_run"] = True
        return _serve(settings.model_copy(update=overrides))
    elif args.command == "sim":
        return _sim(args, settings)
    elif args.command == "migrate":
        asyncio.run(_migrate(settings))
        sys.stdout.write(f"database {_redacted(settings.database_url)} is up to date\n")
    elif args.command == "admin-key":
        if settings.admin_api_key is not None:
            sys.stderr.write("AUTOPROVISION_ADMIN_API_KEY is set; change it there instead\n")
            return 1
        announce_admin_key(asyncio.run(_reset_admin_key(settings)))
    elif args.command == "doctor":
        return asyncio.run(_doctor(settings, args))
    elif args.command == "demo-history":
        if settings.mode != "demo":
            sys.stderr.write(
                "autoprovision: demo-history makes up stock history and runs in demo mode only "
                "(AUTOPROVISION_MODE=demo); refusing in live mode\n"
            )
            return 2
        if not 0 < args.days <= settings.stock_history_days:
            sys.stderr.write(
                f"autoprovision: --days must be more than 0 and at most "
                f"AUTOPROVISION_STOCK_HISTORY_DAYS ({settings.stock_history_days})\n"
            )
            return 2
        return asyncio.run(_demo_history(settings, args))
    return 0
