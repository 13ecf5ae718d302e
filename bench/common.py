"""What the benchmark scripts share: starting the service's processes, the providers' facts
from their specs, and reading /proc."""

import asyncio
import os
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
# The app next to these scripts, not the one the virtualenv was installed from (another
# checkout, when a benchmark runs an older revision): before this or any script imports `app`.
sys.path.insert(0, str(ROOT))

from app.providers.registry import simulated_specs  # noqa: E402
from app.simulators.control import SimControl, control_path  # noqa: E402


def providers() -> list[str]:
    """The providers the simulators serve, in the registry's order."""
    return SimControl.providers()


# Paths (below the provider's mount) of a stock read; what is below them counts too (Verda's
# reads of one instance type's stock).
STOCK_READ_PATHS = {
    "verda": ("/v1/instance-availability",),
    "hyperstack": ("/v1/core/flavors", "/v1/core/stocks"),
    "quantacloud": ("/api/v1/offers",),
}


def is_stock_read_path(provider: str, path: str) -> bool:
    """Whether a request to `path` (below the provider's mount) is part of a stock read."""
    return any(path == p or path.startswith(f"{p}/") for p in STOCK_READ_PATHS[provider])


BENCH_MAX_WAITING = 100_000
BENCH_MAX_PLACEMENTS = 1_000_000


def service_env(
    database_url: str, admin_key: str, sim_port: int, api_port: int, **extra: str
) -> dict[str, str]:
    """This process's environment without AUTOPROVISION_* variables, plus what points a
    demo-mode service (no embedded simulators, no demo feed) at the simulators on `sim_port`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROVISION_")}
    env.update(
        {
            "AUTOPROVISION_DATABASE_URL": database_url,
            "AUTOPROVISION_ADMIN_API_KEY": admin_key,
            "AUTOPROVISION_MODE": "demo",
            "AUTOPROVISION_SIM_EMBEDDED": "false",
            "AUTOPROVISION_DEMO_FEED": "false",
            "AUTOPROVISION_SIM_PORT": str(sim_port),
            "AUTOPROVISION_PORT": str(api_port),
            "AUTOPROVISION_LOG_LEVEL": "warning",
            # Benchmarks place thousands of orders per account, far past a person's caps.
            "AUTOPROVISION_MAX_WAITING_ORDERS_PER_ACCOUNT": str(BENCH_MAX_WAITING),
            "AUTOPROVISION_MAX_PLACEMENTS_PER_HOUR": str(BENCH_MAX_PLACEMENTS),
            **extra,
        }
    )
    return env


def stop(process: subprocess.Popen[bytes], log: Path) -> None:
    """Terminate `process`; kill it, and say so, if it has not stopped 30 s later."""
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)
        print(f"{process.args!r}: did not stop within 30 s of SIGTERM, killed; see {log}")  # noqa: T201


def planned_periods() -> dict[str, float]:
    """Each provider's planned full stock read period (the poll budget, nothing else sent)."""
    return {spec.name: spec.planned_period() for spec in simulated_specs()}


def period_variables(periods: dict[str, float]) -> dict[str, str]:
    """The `AUTOPROVISION_<NAME>_POLL_SECONDS` variables for these periods."""
    specs = {spec.name: spec for spec in simulated_specs()}
    return {
        specs[name].settings_model.env_name("poll_seconds"): str(seconds)
        for name, seconds in periods.items()
    }


def mount_path(provider: str) -> str:
    """Where a provider's simulator is mounted (`/verda`)."""
    return control_path(provider, "").removesuffix("/_sim/")


def sim_ready_url(port: int, *, tls: bool = False) -> str:
    """A control API URL that answers once the simulators on `port` are up."""
    scheme = "https" if tls else "http"
    return f"{scheme}://127.0.0.1:{port}{control_path(providers()[0], 'config')}"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_up(
    url: str, process: subprocess.Popen[bytes], *, verify: ssl.SSLContext | bool = True
) -> None:
    async with httpx.AsyncClient(verify=verify) as client:
        for _ in range(600):
            if process.poll() is not None:
                raise RuntimeError(f"{url} exited early")
            try:
                await client.get(url)
                return
            except httpx.TransportError:
                await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def cpu_seconds(*pids: int) -> float:
    """User + system CPU time these processes have used."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU time of the whole machine so far, all cores, from /proc/stat."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_percent(before: tuple[float, float]) -> float:
    """Per cent of all cores busy since `before` (this benchmark's processes and any other)."""
    after = machine_cpu()
    return round(100 * (after[0] - before[0]) / max(after[1] - before[1], 1.0), 1)


def load_average() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def git_revision() -> str:
    try:
        return subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def start(
    command: list[str], env: dict[str, str], log: Path, root: Path = ROOT
) -> subprocess.Popen[bytes]:
    """`command` as a process of its own, importing the code at `root` (this checkout, or a
    worktree of another revision), its output in `log`."""
    return subprocess.Popen(
        command,
        cwd=log.parent,
        env={**env, "PYTHONPATH": str(root)},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


async def pg_admin(url: str, sql: str) -> None:
    """Run one statement (CREATE or DROP DATABASE) on the PostgreSQL server at `url`."""
    import asyncpg
    from sqlalchemy.engine import make_url

    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()
