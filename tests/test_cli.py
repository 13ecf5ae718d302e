"""The `autoprovision` command: migrate, serve, and the generated admin key."""

import asyncio
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import typer.main
from sqlalchemy import inspect, text

from app.cli import cli, main
from app.providers.http import provider_tls
from app.settings import get_settings
from app.storage.db import create_engine
from app.storage.models import Base
from app.support.security import hash_api_key
from tests.processes import clean_env
from tests.servers import free_port
from tests.waiting import eventually_sync

ADMIN_KEY_LINE = re.compile(r"Admin API key \(shown once, store it now\): (\S+)")


async def _tables_and_admin_hashes(database_url: str) -> tuple[set[str], list[str]]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            tables = await connection.run_sync(lambda c: set(inspect(c).get_table_names()))
            hashes = (await connection.execute(text("SELECT key_hash FROM admin_keys"))).scalars()
            return tables, list(hashes)
    finally:
        await engine.dispose()


@pytest.fixture
def cli_database(empty_database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Point the in-process `autoprovision` command at an empty database."""
    for name, value in clean_env(AUTOPROVISION_DATABASE_URL=empty_database_url).items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    yield empty_database_url
    get_settings.cache_clear()


def test_migrate_creates_the_schema(cli_database: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate"]) == 0
    assert "is up to date" in capsys.readouterr().out
    tables, _hashes = asyncio.run(_tables_and_admin_hashes(cli_database))
    assert set(Base.metadata.tables) <= tables


@pytest.mark.slow  # the service in a process of its own
class TestServe:
    def _start(
        self, database_url: str, cwd: Path, port: int | None = None
    ) -> tuple[subprocess.Popen[str], str, int]:
        port = port or free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--port", str(port)],
            cwd=cwd,
            env=clean_env(
                AUTOPROVISION_DATABASE_URL=database_url,
                AUTOPROVISION_SIM_PORT=str(free_port()),
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        output = ""
        deadline = time.monotonic() + 30
        assert process.stdout is not None
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            output += line
            # Uvicorn says it runs once it has bound the port, after the app's startup.
            if "Uvicorn running on" in line or process.poll() is not None:
                break
        return process, output, port

    def _stop(self, process: subprocess.Popen[str]) -> None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()

    def test_serve_prints_where_it_listens_and_the_admin_key_once(
        self, empty_database_url: str, tmp_path: Path
    ) -> None:
        process, output, port = self._start(empty_database_url, tmp_path)
        try:
            assert f"listening on http://127.0.0.1:{port}" in output, output
            match = ADMIN_KEY_LINE.search(output)
            assert match, output
            admin_key = match.group(1)
            response = httpx.post(
                f"http://127.0.0.1:{port}/v1/accounts",
                json={"name": "Ada"},
                headers={"Authorization": f"Bearer {admin_key}"},
            )
            assert response.status_code == 201
        finally:
            self._stop(process)
        _tables, hashes = asyncio.run(_tables_and_admin_hashes(empty_database_url))
        assert len(hashes) == 1 and admin_key not in hashes[0]

        again, output, port = self._start(empty_database_url, tmp_path)
        try:
            assert ADMIN_KEY_LINE.search(output) is None, output
            assert admin_key not in output
            response = httpx.get(f"http://127.0.0.1:{port}/readyz")
            assert response.status_code == 200
        finally:
            self._stop(again)

    def test_a_second_serve_on_the_same_sqlite_file_says_so_in_one_line_and_exits(
        self, tmp_path: Path
    ) -> None:
        path = (tmp_path / "shared.db").resolve()
        database_url = f"sqlite+aiosqlite:///{path}"
        first, output, port = self._start(database_url, tmp_path)
        try:
            assert f"listening on http://127.0.0.1:{port}" in output, output  # control
            second = subprocess.run(
                [sys.executable, "-m", "app", "serve", "--port", str(free_port())],
                cwd=tmp_path,
                env=clean_env(
                    AUTOPROVISION_DATABASE_URL=database_url,
                    AUTOPROVISION_SIM_PORT=str(free_port()),
                ),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert second.returncode == 1, second
            assert second.stdout == ""  # no "listening", no admin key line, no uvicorn line
            assert second.stderr == (
                f"autoprovision: another autoprovision process is already using {path}: SQLite "
                "serves one process only (stop the other one, or use PostgreSQL to run several "
                "replicas)\n"
            )
            assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
        finally:
            self._stop(first)
        # Control: with the first one stopped, the same command starts.
        again, output, port = self._start(database_url, tmp_path)
        try:
            assert f"listening on http://127.0.0.1:{port}" in output, output
            assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
        finally:
            self._stop(again)

    def test_a_busy_port_is_refused_before_the_admin_key_is_made_or_shown(
        self, empty_database_url: str, tmp_path: Path
    ) -> None:
        port = free_port()
        with socket.create_server(("127.0.0.1", port)):
            busy = subprocess.run(
                [sys.executable, "-m", "app", "serve", "--port", str(port)],
                cwd=tmp_path,
                env=clean_env(
                    AUTOPROVISION_DATABASE_URL=empty_database_url,
                    AUTOPROVISION_SIM_PORT=str(free_port()),
                ),
                capture_output=True,
                text=True,
                timeout=60,
            )
        assert busy.returncode == 1, busy
        assert busy.stdout == ""  # no "listening", no admin key
        assert busy.stderr == (
            f"autoprovision: cannot listen on 127.0.0.1:{port}: the address is in use (stop "
            "what holds it, or choose another port with --port or AUTOPROVISION_PORT)\n"
        )
        # The one-time admin key is still to come: the next start that listens shows it.
        process, output, _port = self._start(empty_database_url, tmp_path, port)
        try:
            assert f"listening on http://127.0.0.1:{port}" in output, output
            assert ADMIN_KEY_LINE.search(output), output
        finally:
            self._stop(process)


def test_admin_key_reset_replaces_the_old_key(
    cli_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["admin-key", "--reset"]) == 0
    first = ADMIN_KEY_LINE.search(capsys.readouterr().out)
    assert main(["admin-key", "--reset"]) == 0
    second = ADMIN_KEY_LINE.search(capsys.readouterr().out)
    assert first and second and first.group(1) != second.group(1)
    _tables, hashes = asyncio.run(_tables_and_admin_hashes(cli_database))
    assert hashes == [hash_api_key(second.group(1))]


def test_a_bad_setting_is_one_clear_line_not_a_traceback(
    cli_database: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AUTOPROVISION_ADMIN_API_KEY", "short")
    assert main(["migrate"]) == 2
    err = capsys.readouterr().err
    assert "AUTOPROVISION_ADMIN_API_KEY" in err and "at least 16 characters" in err
    assert "Traceback" not in err and "short" not in err


@pytest.mark.slow  # the simulators in a process of their own
def test_sim_serves_the_three_simulators(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "sim", "--port", str(port)],
        cwd=tmp_path,
        env=clean_env(AUTOPROVISION_DATABASE_URL="sqlite+aiosqlite:///unused.db"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def catalogue_answers() -> list[int] | None:
            assert process.poll() is None, "sim did not start"
            try:
                return [
                    httpx.get(f"http://127.0.0.1:{port}/{p}/_sim/catalog").status_code
                    for p in ("verda", "hyperstack", "quantacloud")
                ]
            except httpx.TransportError:
                return None

        answers = eventually_sync(catalogue_answers, 30, 0.1, what="sim did not start")
        assert answers == [200, 200, 200]
        token = httpx.post(
            f"http://127.0.0.1:{port}/verda/v1/oauth2/token",
            json={
                "grant_type": "client_credentials",
                "client_id": "sim-client",
                "client_secret": "sim-secret",
            },
        )
        assert token.status_code == 200 and token.json()["token_type"] == "Bearer"
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert process.stdout is not None
    assert f"Provider simulators on http://127.0.0.1:{port}" in process.stdout.read()


def test_sim_over_tls_and_a_slow_network(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "sim", "--port", str(port), "--tls", "--latency-ms", "40",
         "--cert-dir", str(tmp_path / "tls")],
        cwd=tmp_path,
        env=clean_env(AUTOPROVISION_DATABASE_URL="sqlite+aiosqlite:///unused.db"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    catalog = f"https://127.0.0.1:{port}/verda/_sim/catalog"
    try:
        cert = eventually_sync(lambda: (tmp_path / "tls" / "sim-cert.pem").exists(), seconds=30)
        assert cert
        with httpx.Client(verify=provider_tls(tmp_path / "tls" / "sim-cert.pem")) as client:

            def answered() -> bool:
                assert process.poll() is None, "sim exited"
                try:
                    return client.get(catalog).status_code == 200
                except httpx.TransportError:
                    return False

            assert eventually_sync(answered, seconds=30)
            started = time.monotonic()
            assert client.get(catalog).status_code == 200  # on the connection already open
            assert time.monotonic() - started >= 0.04  # a round trip: 20 ms each way
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert process.stdout is not None
    out = process.stdout.read()
    assert f"Provider simulators on https://127.0.0.1:{port}" in out
    assert "Latency: 40 ms round trip" in out


def test_sim_refuses_a_negative_latency(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--latency-ms", "-5"]) == 2
    assert "--latency-ms and --jitter-ms must be 0 or more" in capsys.readouterr().err


class TestHelp:
    def _help(self, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
        assert main([*argv, "--help"]) == 0
        return capsys.readouterr().out

    def test_it_lists_the_server_and_the_client_commands_apart(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        out = self._help(capsys)
        assert "Usage: autoprovision [OPTIONS] COMMAND [ARGS]..." in out
        server, client = out.split("Run the service")[1].split("Talk to a running service")
        server_names = ["serve", "migrate", "sim", "admin-key", "doctor", "demo-history"]
        client_names = ["orders", "offers", "account", "watch", "models"]
        for name in server_names:
            assert re.search(rf"^│ {name} ", server, re.MULTILINE), name
            assert not re.search(rf"^│ {name} ", client, re.MULTILINE), name
        for name in client_names:
            assert re.search(rf"^│ {name} ", client, re.MULTILINE), name
            assert not re.search(rf"^│ {name} ", server, re.MULTILINE), name
        assert max(len(line) for line in out.splitlines()) <= 88

    def test_every_command_is_listed_in_one_of_the_two_groups(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        out = self._help(capsys)
        listed = set(re.findall(r"^│ ([a-z][a-z-]*) ", out, re.MULTILINE))
        assert listed == set(typer.main.get_command(cli).commands)  # type: ignore[attr-defined]

    def test_a_command_s_help_names_it(self, capsys: pytest.CaptureFixture[str]) -> None:
        out = self._help(capsys, "serve")
        assert "Usage: autoprovision serve [OPTIONS]" in out, out
        assert "Migrate the database, then serve the API" in out

    def test_no_command_at_all_prints_the_help(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main([]) == 2
        out = capsys.readouterr().out
        assert "Run the service" in out and "Talk to a running service" in out

    @pytest.mark.slow  # four processes of their own
    def test_help_imports_none_of_the_server(self, tmp_path: Path) -> None:
        """`--help` answers in a fraction of a second because it loads no server module; the
        control, `migrate`, does load them."""
        probe = (
            "import sys; from app.cli import main; main(sys.argv[1:]); "
            "print(sorted(m for m in sys.modules if m in ('app.main', 'sqlalchemy', 'fastapi')))"
        )
        env = clean_env(AUTOPROVISION_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")

        def loaded(*argv: str) -> str:
            ran = subprocess.run(
                [sys.executable, "-c", probe, *argv],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            )
            return ran.stdout.splitlines()[-1]

        assert loaded("--help") == "[]"
        assert loaded("orders", "--help") == "[]"
        assert loaded("serve", "--help") == "[]"
        assert loaded("migrate") == "['sqlalchemy']"


def test_admin_key_without_reset_says_what_reset_does_and_changes_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["admin-key"]) == 2
    err = capsys.readouterr().err
    assert "admin-key needs --reset" in err and "the old one stops working" in err
