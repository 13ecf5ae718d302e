"""The simulators and the service as real processes, for tests that kill them."""

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from app.providers.registry import simulator_environment
from app.simulators.control import SimControl, SimControlSync, control_path
from app.storage.db import create_engine
from tests.fixtures.settings import ADMIN_KEY, SECRET_KEY
from tests.servers import free_port
from tests.waiting import eventually_sync

ROOT = Path(__file__).resolve().parent.parent


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without any AUTOPROVISION_ setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPROVISION_")}
    env.update(PYTHONPATH=str(ROOT), **extra)
    return env


def wait_until_up(url: str, process: subprocess.Popen[bytes], seconds: float = 30) -> None:
    """Block until `url` answers; fail if the process exits first."""

    def answers() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"process for {url} exited with {process.returncode}")
        try:
            httpx.get(url, timeout=1)
        except httpx.TransportError:
            return False
        return True

    eventually_sync(answers, seconds, what=f"{url} did not come up")


def control_url(sim_url: str, call: str) -> str:
    """A control API call's URL on the first simulator (any answers once all are up)."""
    return sim_url + control_path(SimControl.providers()[0], call)


class SimProcess:
    """`autoprovision sim` in its own process, so it outlives a killed service."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", "sim", "--port", str(self.port)],
            cwd=workdir,
            env=clean_env(AUTOPROVISION_LOG_LEVEL="warning"),
            stdout=(workdir / "sim.log").open("ab"),
            stderr=subprocess.STDOUT,
        )
        wait_until_up(control_url(self.url, "config"), self.process)
        self.control = SimControlSync(self.url)

    def stop(self) -> None:
        """Terminate it."""
        self.control.close()
        self.process.terminate()
        self.process.wait(timeout=10)


class ServiceProcess:
    """`autoprovision serve` in live mode against a SimProcess, with quick timings."""

    def __init__(self, workdir: Path, database_url: str, sim: SimProcess, **settings: Any) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        values = {
            "DATABASE_URL": database_url,
            "ADMIN_API_KEY": ADMIN_KEY,
            "SECRET_KEY": SECRET_KEY,
            "MODE": "live",
            "PORT": str(self.port),
            "LOG_LEVEL": "warning",
            "FOLLOW_SECONDS": "0.2",
            "WAITING_REFRESH_SECONDS": "0.2",
            "OUTCOME_CHECK_SECONDS": "0.5",
            "PROVIDER_TIMEOUT_SECONDS": "2",
            "PROVIDER_CREATE_TIMEOUT_SECONDS": "1",
            "CAPACITY_COOLDOWN_SECONDS": "0.5",
            "LEADER_LEASE_SECONDS": "2",
        }
        values.update({k.upper(): str(v) for k, v in settings.items()})
        # Every provider pointed at its simulator: AUTOPROVISION_VERDA_BASE_URL and the like.
        providers = simulator_environment(sim.url, poll_seconds=0.2)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve"],
            cwd=workdir,
            env=clean_env(**{**providers, **{f"AUTOPROVISION_{k}": v for k, v in values.items()}}),
            stdout=(workdir / f"service-{self.port}.log").open("ab"),
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        """The service's process id."""
        return self.process.pid

    def wait_until_up(self) -> "ServiceProcess":
        """Block until /healthz answers (migrations done, lifespan started)."""
        wait_until_up(f"{self.url}/healthz", self.process)
        return self

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs at all."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def terminate(self) -> None:
        """SIGTERM: the graceful shutdown."""
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=40)


def query(database_url: str, statement: Any) -> list[Any]:
    """Run one read against the test's database from synchronous test code."""

    async def read() -> list[Any]:
        engine = create_engine(database_url)
        try:
            async with engine.connect() as connection:
                return list((await connection.execute(statement)).all())
        finally:
            await engine.dispose()

    return asyncio.run(read())
