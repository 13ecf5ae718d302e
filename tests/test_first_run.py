"""The first run, as a new user has it: `autoprovision serve` (what `make run` runs) with no
settings at all but its ports, in a directory of its own, as real processes."""

import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.processes import ROOT, clean_env
from tests.servers import free_port
from tests.waiting import eventually_sync

# Slow: each test runs `make` and the service in processes of their own.
pytestmark = pytest.mark.slow

DEMO_KEY = re.compile(r"Demo account API key: (\S+)")


class FirstRun:
    """`autoprovision serve` in `workdir`, demo mode by default, its output kept in a file."""

    def __init__(self, workdir: Path, **settings: str) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"serve-{self.port}.log"
        env = clean_env(
            AUTOPROVISION_PORT=str(self.port),
            AUTOPROVISION_SIM_PORT=str(free_port()),
            **{f"AUTOPROVISION_{k.upper()}": v for k, v in settings.items()},
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve"],
            cwd=workdir,
            env=env,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
        )

    @property
    def output(self) -> str:
        """What it printed so far."""
        return self.log.read_text()

    def wait_until_up(self) -> "FirstRun":
        """Until uvicorn says it runs (after the lifespan started) and /readyz answers."""

        def up() -> bool:
            assert self.process.poll() is None, self.output
            if "Uvicorn running on" not in self.output:
                return False
            try:
                return httpx.get(f"{self.url}/readyz", timeout=5).status_code == 200
            except httpx.TransportError:
                return False

        eventually_sync(up, seconds=60, interval=0.1)
        return self

    def demo_key(self) -> str:
        """The demo account's key it printed."""
        match = DEMO_KEY.search(self.output)
        assert match, self.output
        return match.group(1)

    def stop(self) -> str:
        """Ctrl+C, as a person stops `make run`; what it printed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(timeout=40)
        return self.output


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory of its own, as a fresh clone is."""
    path = tmp_path / "clone"
    path.mkdir()
    return path


@pytest.fixture
def first_run(workdir: Path) -> Iterator[FirstRun]:
    """`autoprovision serve` up in demo mode on ./autoprovision.db."""
    run = FirstRun(workdir)
    try:
        yield run.wait_until_up()
    finally:
        run.stop()


def test_each_server_line_is_printed_once(first_run: FirstRun) -> None:
    output = first_run.stop()
    for line in (
        "Started server process",
        "Waiting for application startup.",
        "Application startup complete.",
        "Uvicorn running on",
        "Shutting down",
        "Finished server process",
    ):
        assert output.count(line) == 1, (line, output)


def test_the_files_a_first_run_leaves_are_ignored_by_git(
    first_run: FirstRun, workdir: Path
) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout")
    left = sorted(p.name for p in workdir.iterdir() if p != first_run.log)
    assert "autoprovision.db" in left and "autoprovision.db.lock" in left, left  # control
    not_ignored = [
        name
        for name in left
        if subprocess.run(
            ["git", "check-ignore", "--quiet", "--no-index", name], cwd=ROOT
        ).returncode
        != 0
    ]
    assert not_ignored == []
    # Control: git does tell a file it would not ignore.
    assert subprocess.run(["git", "check-ignore", "-q", "--no-index", "x.py"], cwd=ROOT).returncode


def test_a_restart_keeps_the_demo_key_and_the_dashboard_signed_in(
    first_run: FirstRun, workdir: Path, tmp_path: Path
) -> None:
    key = first_run.demo_key()
    account = httpx.get(f"{first_run.url}/v1/account", headers={"Authorization": f"Bearer {key}"})
    assert account.status_code == 200 and account.json()["name"] == "demo"
    first_run.stop()

    again = FirstRun(workdir)  # the same directory: the same database and secret key file
    try:
        again.wait_until_up()
        assert again.demo_key() == key, "the same key is printed again"
        headers = {"Authorization": f"Bearer {key}"}
        assert httpx.get(f"{again.url}/v1/account", headers=headers).status_code == 200
        wrong = {"Authorization": f"Bearer {key[:-1]}{'A' if key[-1] != 'A' else 'B'}"}
        assert httpx.get(f"{again.url}/v1/account", headers=wrong).status_code == 401
    finally:
        again.stop()

    # Control: a new clone (a new database) has a demo key of its own.
    (tmp_path / "other").mkdir()
    other = FirstRun(tmp_path / "other")
    try:
        assert other.wait_until_up().demo_key() != key
    finally:
        other.stop()
