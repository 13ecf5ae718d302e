"""The `autoprovision` command, one Typer app: serve, migrate, sim, admin-key, doctor and
demo-history run the service; orders, offers, account, watch and models talk to a running one
over its REST API (app/client)."""

from __future__ import annotations

import asyncio
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from app.cli import server as run
from app.client.api import ClientError
from app.client.commands import add_client_commands

# The server's modules are imported inside the commands that need them, so that `--help` and
# the client commands start in a fraction of the time a server import takes.
if TYPE_CHECKING:
    from app.settings import Settings

PROG = "autoprovision"
SERVICE_PANEL = "Run the service (on this machine, with its settings and database)"
CLIENT_PANEL = "Talk to a running service (over its REST API)"
CLIENT_EPILOG = (
    "`autoprovision COMMAND --help` tells more about each command. The client commands take "
    "--url (or AUTOPROVISION_API_URL; default http://127.0.0.1:8000), --key (or "
    "AUTOPROVISION_API_KEY) and --json for scripts. Exit codes: 0 done, 1 refused or the order "
    "failed, 2 bad input, 3 service unreachable."
)

cli = typer.Typer(
    name=PROG,
    help="Waits for scarce GPU machines and deploys one the moment matching stock appears.",
    epilog=CLIENT_EPILOG,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
server = functools.partial(cli.command, rich_help_panel=SERVICE_PANEL)  # a server command

Host = Annotated[
    str | None,
    typer.Option(
        "--host", help="Address to listen on (default: AUTOPROVISION_HOST).", show_default=False
    ),
]


def _done(code: int) -> NoReturn:
    raise typer.Exit(code)


def _settings() -> Settings:
    """The service's settings, provider settings included; bad ones end the command (exit 2)
    with one line per variable."""
    from pydantic import ValidationError

    from app.providers.registry import variable_name, with_provider_settings
    from app.settings import get_settings

    try:
        return with_provider_settings(get_settings())
    except ValidationError as exc:
        for error in exc.errors():
            sys.stderr.write(f"{PROG}: {variable_name(error['loc'])}: {error['msg']}\n")
        _done(2)


@server("serve")
def serve(
    host: Host = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port", help="Port to listen on (default: AUTOPROVISION_PORT).", show_default=False
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Read and match stock but send no create (default: AUTOPROVISION_DRY_RUN).",
        ),
    ] = False,
) -> None:
    """Migrate the database, then serve the API and the dashboard.

    In demo mode, the simulated providers too."""
    from app.background import LIVE_WITHOUT_CREDENTIALS
    from app.providers.registry import configured_providers

    settings = _settings()
    if settings.mode == "live" and settings.watcher and not configured_providers(settings):
        sys.stderr.write(f"{PROG}: {LIVE_WITHOUT_CREDENTIALS}\n")
        _done(2)
    overrides = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    if dry_run:
        overrides["dry_run"] = True
    _done(run.serve(settings.model_copy(update=overrides)))


@server("migrate")
def migrate() -> None:
    """Apply database migrations and exit."""
    settings = _settings()
    asyncio.run(run.migrate_database(settings))
    sys.stdout.write(f"database {run.redacted(settings.database_url)} is up to date\n")


@server("sim")
def sim(
    host: Host = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            help="Port to listen on (default: AUTOPROVISION_SIM_PORT).",
            show_default=False,
        ),
    ] = None,
    latency_ms: Annotated[
        float,
        typer.Option(
            "--latency-ms",
            help="Round-trip network latency to add: every byte waits half of it each way, in "
            "a loopback relay (so TLS handshakes pay it too).",
        ),
    ] = 0.0,
    jitter_ms: Annotated[
        float, typer.Option("--jitter-ms", help="Up to this much more round trip, at random.")
    ] = 0.0,
    tls: Annotated[
        bool, typer.Option("--tls", help="Serve HTTPS with a self-signed certificate made now.")
    ] = False,
    cert_dir: Annotated[
        Path | None,
        typer.Option(
            "--cert-dir", help="Where --tls writes it (default: a temp dir).", show_default=False
        ),
    ] = None,
) -> None:
    """Run the three provider simulators on their own."""
    if latency_ms < 0 or jitter_ms < 0:
        sys.stderr.write(f"{PROG}: --latency-ms and --jitter-ms must be 0 or more\n")
        _done(2)
    from app.simulators.network import Latency
    from app.simulators.run import default_tls_dir, run_simulators

    settings = _settings()
    latency = Latency(latency_ms / 2, jitter_ms / 2) if latency_ms or jitter_ms else None
    tls_dir = (cert_dir or default_tls_dir()) if tls else None
    host, port = host or settings.host, port or settings.sim_port
    run_simulators(host, port, settings.log_level, latency=latency, tls_dir=tls_dir)


@server("admin-key")
def admin_key(
    reset: Annotated[
        bool, typer.Option("--reset", help="Replace the admin key with a new one and print it.")
    ] = False,
) -> None:
    """Make a new admin API key (--reset) and print it."""
    if not reset:
        sys.stderr.write(
            f"{PROG}: admin-key needs --reset: it replaces the admin key, and the old one "
            "stops working\n"
        )
        _done(2)
    from app.main import announce_admin_key

    settings = _settings()
    if settings.admin_api_key is not None:
        sys.stderr.write("AUTOPROVISION_ADMIN_API_KEY is set; change it there instead\n")
        _done(1)
    announce_admin_key(asyncio.run(run.reset_admin_key(settings)))


@server("doctor")
def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
    demo: Annotated[
        bool, typer.Option("--demo", help="Check the simulators, as demo mode uses them.")
    ] = False,
    sim_url: Annotated[
        str | None,
        typer.Option(
            "--sim-url", help="The simulators' address (implies --demo).", show_default=False
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            help="Seconds a provider call may take (default: "
            "AUTOPROVISION_PROVIDER_TIMEOUT_SECONDS).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Check, reading only, everything a live deploy needs; exit 1 on a failure."""
    settings = _settings()
    _done(
        asyncio.run(
            run.check(settings, as_json=as_json, demo=demo, sim_url=sim_url, timeout=timeout)
        )
    )


@server("demo-history")
def demo_history(
    days: Annotated[float, typer.Option("--days", help="How many days back.")] = 7,
    seed: Annotated[
        int | None,
        typer.Option("--seed", help="Random seed, for the same history again.", show_default=False),
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Delete earlier generated history first.")
    ] = False,
) -> None:
    """Demo mode only: add generated stock history for the simulated providers."""
    settings = _settings()
    if settings.mode != "demo":
        sys.stderr.write(
            f"{PROG}: demo-history makes up stock history and runs in demo mode only "
            "(AUTOPROVISION_MODE=demo); refusing in live mode\n"
        )
        _done(2)
    if not 0 < days <= settings.stock_history_days:
        sys.stderr.write(
            f"{PROG}: --days must be more than 0 and at most "
            f"AUTOPROVISION_STOCK_HISTORY_DAYS ({settings.stock_history_days})\n"
        )
        _done(2)
    _done(asyncio.run(run.add_demo_history(settings, days=days, seed=seed, replace=replace)))


add_client_commands(cli, CLIENT_PANEL)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `autoprovision` command: its exit code (bad input, refusals and an
    unreachable service are one line on stderr)."""
    command = typer.main.get_command(cli)
    try:
        command.main(args=sys.argv[1:] if argv is None else list(argv), prog_name=PROG)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except ClientError as exc:
        sys.stderr.write(f"{PROG}: {exc}\n")
        return int(exc.exit_code)
    return 0
