"""What the peer race's modules share: the machine raced for, the loopback-only environment of a
peer's processes, its virtualenv, the processes started and their clean-up, and the interface
each peer module (`peer_dstack`, `peer_skypilot`) implements for `race.py`."""

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from app.simulators.control import SimControl

PEERS = Path(__file__).resolve().parent
# The machine every tool waits for, and what each may pay for it.
SKU, REGION, GPU_MODEL = "1A6000.10V", "FIN-01", "RTX-A6000"
MAX_PRICE = "5.00"
# The Verda simulator's credentials (it takes any); all tools share them, so they share one
# project's rate limits, as tools on one Verda account would.
CLIENT_ID, CLIENT_SECRET = "sim-client", "sim-secret"
# VMs never reach `running`: no answer carries an IP (the simulator's are 203.0.113.x), so no
# tool ever SSHes anywhere.
BOOT_SECONDS = 1_000_000
# Any stray HTTP(S) from a peer's processes goes to a closed loopback port.
DEAD_PROXY = "http://127.0.0.1:9"


def log(message: str) -> None:
    """One progress line on stderr, with the time."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)  # noqa: T201


def loopback_env(home: Path, **extra: str) -> dict[str, str]:
    """A peer process's environment: nothing of the user's but PATH and the locale, `HOME` in
    the run's temporary directory, every HTTP(S) proxy set to a closed loopback port (loopback
    itself exempt), plus `extra`."""
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TZ")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["HOME"] = str(home)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = DEAD_PROXY
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env.update(extra)
    return env


def ensure_venv(venv: Path, requirement: str, check: str, version: str) -> None:
    """Make `venv` with `requirement` from PyPI, unless `python -c check` there already prints
    `version`."""
    python = str(venv / "bin" / "python")
    if Path(python).exists():
        found = subprocess.run([python, "-c", check], capture_output=True, text=True, timeout=300)
        if found.returncode == 0 and found.stdout.strip() == version:
            return
    log(f"installing {requirement} into {venv} (PyPI)")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", requirement], check=True, timeout=1800
    )
    done = subprocess.run([python, "-c", check], capture_output=True, text=True, timeout=300)
    if done.returncode != 0 or done.stdout.strip() != version:
        raise RuntimeError(f"{venv}: expected {version}, got {done.stdout}{done.stderr}")


# --- processes -------------------------------------------------------------------------------


@dataclass
class Processes:
    """Every long-running process this script started, stopped (their whole process group) at
    exit."""

    started: list[tuple[subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def start(
        self, command: list[str], env: dict[str, str], log_file: Path
    ) -> subprocess.Popen[bytes]:
        """Start `command` in its own session, output to `log_file`."""
        process = subprocess.Popen(
            command,
            cwd=log_file.parent,
            env=env,
            stdout=log_file.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.started.append((process, log_file))
        return process

    def check(self) -> None:
        """Raise if one of them has exited."""
        for process, log_file in self.started:
            if process.poll() is not None:
                raise RuntimeError(
                    f"{process.args!r} exited ({process.returncode}); see {log_file}"
                )

    def stop_all(self) -> None:
        """Newest first, one at a time: SIGTERM its process group, SIGKILL it 30 s later."""
        for process, log_file in reversed(self.started):
            if process.poll() is None:
                _signal_group(process, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    log(f"{process.args!r}: running 30 s after SIGTERM, killed; see {log_file}")
            _signal_group(process, signal.SIGKILL)  # children it left behind, if any
            if process.poll() is None:
                process.wait(timeout=30)


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with suppress(ProcessLookupError):
        os.killpg(process.pid, sig)  # its own session: the group id is its pid


def kill_leftovers(home: Path) -> int:
    """SIGKILL every process whose environment has `HOME=<home>` (a peer's daemons that left
    its process group: only this run's processes have that temporary HOME); how many."""
    marker = f"HOME={home}".encode()
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker in environ:
            with suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
    return killed


@contextmanager
def cleanup(processes: Processes) -> Iterator[None]:
    """Stop every started process on the way out, SIGTERM to this script included."""
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        yield
    finally:
        processes.stop_all()
        signal.signal(signal.SIGTERM, previous)


async def wait_answering(url: str, processes: Processes, seconds: float = 120) -> None:
    """Until `url` answers anything over HTTP (or raise after `seconds`)."""
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient(trust_env=False, timeout=5) as client:
        while time.monotonic() < deadline:
            processes.check()
            try:
                await client.get(url)
                return
            except httpx.TransportError:
                await asyncio.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {seconds:g} s")


def run_cli(
    command: list[str], env: dict[str, str], cwd: Path, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Run a peer's CLI to the end; its output, or raise with it."""
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stdout}\n{done.stderr}")
    return done


# --- what race.py asks of a peer -------------------------------------------------------------


class Peer(Protocol):
    """One peer tool: installed in its own venv, started against the Verda simulator, given one
    request per round for the machine, and stopped."""

    name: str  # its key in the report ("dstack", "skypilot")
    version: str

    @property
    def home(self) -> Path:
        """HOME of all its processes, in the run's temporary directory."""

    def ensure(self) -> None:
        """Its virtualenv, installed from PyPI on the first run."""

    async def start(self, sim: SimControl, processes: Processes) -> dict[str, Any]:
        """Its catalog, configuration and server, up and answering; facts for the report."""

    async def submit(self, number: int) -> None:
        """Ask for the machine, as round `number`'s own run or cluster."""

    async def until_waiting(self, number: int, sim: SimControl, processes: Processes) -> None:
        """Return once it has tried, found no capacity and will try again."""

    def owns(self, number: int, vm_name: str) -> bool:
        """Whether a create with this VM name (hostname) is its create in round `number`."""

    async def attempts_before_stock(self, number: int, creates: list[dict[str, Any]]) -> int:
        """How many tries it has made in round `number` (called just before the stock appears,
        with the creates log so far)."""

    async def end_round(self, number: int) -> None:
        """Stop round `number`'s request (its VM, still `ordered`, stays in the simulator)."""

    async def stop(self) -> None:
        """Before its processes are killed: anything of its own that stops it cleanly."""
