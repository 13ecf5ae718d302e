"""SkyPilot 0.14.1 in the peer race: a SkyPilot API server (`sky api start --foreground`) from
bench/peers/.venv-skypilot whose Verda cloud talks to the Verda simulator, and one
`sky launch --retry-until-up` per round, each for a new cluster `sky-bench-r<N>`.

Nothing of SkyPilot is patched (bench/peers/SKYPILOT.md has the details):
- API base URL: SkyPilot's own Verda client reads `VERDA_BASE_URL` (with `VERDA_CLIENT_ID` and
  `VERDA_CLIENT_SECRET`); the API server's executors build the client, so it is in the
  environment of `sky api start`.
- Catalog: `~/.sky/catalogs/v8/verda/vms.csv` is written by SkyPilot's own fetcher
  (`sky.catalog.data_fetchers.fetch_verda`) from the simulator, with one unit of the machine in
  stock while it runs (the fetcher lists only what is available then). A CSV with no `.md5`
  beside it counts as modified locally, and SkyPilot never downloads over it.
- Telemetry and version checks: usage collection off, its URLs at a closed loopback port, and
  every HTTP(S) proxy at that port (PyPI's version check fails locally).

`--retry-until-up` never reads availability: each try is a whole launch ending in a create, and
after every failed try the request sleeps a fixed 30 s (`_RETRY_UNTIL_UP_INIT_GAP_SECONDS`).
"""

import asyncio
import csv
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from race_common import (
    CLIENT_ID,
    CLIENT_SECRET,
    DEAD_PROXY,
    PEERS,
    REGION,
    SKU,
    Processes,
    ensure_venv,
    log,
    loopback_env,
    run_cli,
    wait_answering,
)

from app.simulators.control import SimControl

SKYPILOT_VERSION = "0.14.1"
SKYPILOT_VENV = PEERS / ".venv-skypilot"
CATALOG_PATH_CODE = (
    "from sky.catalog import common; print(common.get_catalog_path('verda/vms.csv'))"
)


def sky_bin(name: str) -> str:
    """A program in the SkyPilot virtualenv."""
    return str(SKYPILOT_VENV / "bin" / name)


def cluster(number: int) -> str:
    """Round `number`'s cluster (a new one each round: the last one's stays INIT)."""
    return f"sky-bench-r{number}"


@dataclass
class SkyPilot:
    """A SkyPilot API server in `workdir`, and its CLI."""

    workdir: Path
    sim_port: int
    port: int
    name: str = "skypilot"
    version: str = SKYPILOT_VERSION
    requests: dict[int, str] = field(default_factory=dict)  # round -> sky.launch request id

    @property
    def home(self) -> Path:
        """HOME of every SkyPilot process (its ~/.sky: state, requests, logs, catalogs)."""
        return self.workdir / "home"

    def env(self) -> dict[str, str]:
        """The environment of every SkyPilot process: nothing of the user's, loopback only."""
        return loopback_env(
            self.home,
            VERDA_CLIENT_ID=CLIENT_ID,
            VERDA_CLIENT_SECRET=CLIENT_SECRET,
            VERDA_BASE_URL=f"http://127.0.0.1:{self.sim_port}/verda/v1",
            VERDA_DEFAULT_REGION=REGION,
            SKYPILOT_API_SERVER_LOCAL_PORT=str(self.port),
            SKYPILOT_DISABLE_USAGE_COLLECTION="1",
            DO_NOT_TRACK="1",
            SCARF_NO_ANALYTICS="1",
            SKYPILOT_USAGE_LOG_URL=DEAD_PROXY,
            SKYPILOT_SCARF_GATEWAY_URL=DEAD_PROXY,
        )

    def ensure(self) -> None:
        """bench/peers/.venv-skypilot with skypilot[verda]==SKYPILOT_VERSION."""
        check = "import sky; print(sky.__version__)"
        requirement = f"skypilot[verda]=={SKYPILOT_VERSION}"
        ensure_venv(SKYPILOT_VENV, requirement, check, SKYPILOT_VERSION)

    def cli(self, *args: str, timeout: float = 180) -> str:
        """Run the `sky` CLI (against this API server); its output, or raise with it."""
        done = run_cli([sky_bin("sky"), *args], self.env(), self.workdir / "cli", timeout)
        return done.stdout + done.stderr

    async def build_catalog(self, sim: SimControl) -> int:
        """SkyPilot's Verda catalog, written by its own fetcher from the simulator with one unit
        of the machine in stock (back to none after); the number of rows."""
        path = Path(
            run_cli(
                [sky_bin("python"), "-c", CATALOG_PATH_CODE], self.env(), self.workdir
            ).stdout.strip()
        )
        if not path.is_relative_to(self.home):
            raise RuntimeError(f"SkyPilot's catalog path {path} is outside {self.home}")
        await sim.stock("verda", SKU, REGION, 1)
        try:
            fetcher = [sky_bin("python"), "-m", "sky.catalog.data_fetchers.fetch_verda", str(path)]
            await asyncio.to_thread(run_cli, fetcher, self.env(), self.workdir)
        finally:
            await sim.stock("verda", SKU, REGION, 0)
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        if not any(r["InstanceType"] == SKU and r["Region"] == REGION for r in rows):
            raise RuntimeError(f"{path} has no row for {SKU} in {REGION}")
        return len(rows)

    async def start(self, sim: SimControl, processes: Processes) -> dict[str, Any]:
        """The catalog, `sky api start` on 127.0.0.1:port answering, `sky check verda`."""
        (self.workdir / "cli").mkdir(parents=True)
        self.home.mkdir()
        rows = await self.build_catalog(sim)
        log(f"skypilot: its fetcher wrote {rows} Verda catalog rows from the simulator")
        command = [sky_bin("sky"), "api", "start", "--host", "127.0.0.1"]
        command += ["--port", str(self.port), "--foreground"]
        processes.start(command, self.env(), self.workdir / "sky-api-server.log")
        await wait_answering(f"http://127.0.0.1:{self.port}/api/health", processes, 180)
        checked = await asyncio.to_thread(self.cli, "check", "verda")
        if "enabled" not in checked.lower():
            raise RuntimeError(f"sky check verda: {checked}")
        log(f"skypilot: API server on :{self.port}, Verda enabled")
        return {"skypilot_verda_rows_in_catalog": rows}

    async def submit(self, number: int) -> None:
        """`sky launch --retry-until-up --async` for a new cluster; keeps its request id."""
        args = ["launch", "-c", cluster(number), "--infra", f"verda/{REGION}"]
        args += ["--instance-type", SKU, "--retry-until-up", "-y", "-d", "--async", "echo hi"]
        said = await asyncio.to_thread(self.cli, *args)
        found = re.search(r"sky api logs ([0-9a-f-]{8,})", said) or re.search(
            r"request(?: ID)?:? ([0-9a-f-]{8,})", said, re.IGNORECASE
        )
        if found is None:
            raise RuntimeError(f"no request id in sky launch's answer: {said}")
        self.requests[number] = found.group(1)

    def owns(self, number: int, vm_name: str) -> bool:
        """Its VMs are named `<cluster>-<user hash>-head`."""
        return vm_name.startswith(f"{cluster(number)}-")

    async def until_waiting(self, number: int, sim: SimControl, processes: Processes) -> None:
        """Waiting means: the simulator has refused one of this round's creates for capacity."""
        deadline = time.monotonic() + 180
        while not any(
            self.owns(number, str(c.get("name") or "")) and c["outcome"] == "no_capacity"
            for c in await sim.creates("verda")
        ):
            processes.check()
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"no create from SkyPilot's {cluster(number)} within 180 s "
                    f"(request {self.requests.get(number)}; see {self.workdir})"
                )
            await asyncio.sleep(1)

    async def attempts_before_stock(self, number: int, creates: list[dict[str, Any]]) -> int:
        """Its creates in this round so far (all refused for capacity)."""
        return sum(1 for c in creates if self.owns(number, str(c.get("name") or "")))

    async def end_round(self, number: int) -> None:
        """The launch request cancelled: it would otherwise wait 16 min for the VM to run.
        (`sky down` is no way out: SkyPilot has no status for Verda's `ordered`.)"""
        request = self.requests.get(number)
        if request is not None:
            await asyncio.to_thread(self.cli, "api", "cancel", request, "-y")

    async def stop(self) -> None:
        """Nothing: the API server and its executors go with its process group (`sky api stop`
        would look for it by command line among all processes)."""
