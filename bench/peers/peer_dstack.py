"""dstack 0.22.5 in the peer race: a `dstack server` from bench/peers/.venv-dstack whose `verda`
backend talks to the Verda simulator, and one task run per round with
`retry: {on_events: [no-capacity]}` in a fleet limited to the machine.

What is not dstack as shipped (bench/peers/README.md has the details):
- API base URL: the `verda` SDK reads no variable for it, so `dstack_site/sitecustomize.py`
  (on PYTHONPATH of the dstack processes only) changes `VerdaClient`'s default `base_url` to
  `BENCH_VERDA_BASE_URL`, and refuses anything that is not 127.0.0.1.
- gpuhunt catalog: dstack reads Verda offers from gpuhunt's published catalog (S3). It is built
  the way it is published, with gpuhunt's own collector (`python -m gpuhunt verda`) run against
  the simulator, and served through GPUHUNT_CATALOG_URL=file://... (the other providers'
  catalogs are empty files). Availability still comes live from /instance-availability.

dstack re-tries a pending run after 15 s, 30 s, 1, 2, 5 then every 10 min (its
`_PENDING_RETRY_DELAYS`), and caches a backend's offers and availability for 180 s.
"""

import asyncio
import subprocess
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from race_common import (
    CLIENT_ID,
    CLIENT_SECRET,
    MAX_PRICE,
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

DSTACK_VERSION = "0.22.5"
DSTACK_VENV = PEERS / ".venv-dstack"
DSTACK_SITE = PEERS / "dstack_site"
DSTACK_TOKEN = "bench-dstack-admin-token"
DSTACK_GPU = "A6000"


def dstack_bin(name: str) -> str:
    """A program in the dstack virtualenv."""
    return str(DSTACK_VENV / "bin" / name)


def submissions(info: dict[str, Any]) -> int:
    """How many times the run's job has been submitted (provisioning attempts): the newest
    submission's `submission_num` plus one (the API may list only the latest submissions)."""
    numbers = [s["submission_num"] for job in info["jobs"] for s in job["job_submissions"]]
    return max(numbers, default=-1) + 1


@dataclass
class Dstack:
    """A dstack server in `workdir`, and its CLI."""

    workdir: Path
    sim_port: int
    port: int
    name: str = "dstack"
    version: str = DSTACK_VERSION
    client: httpx.AsyncClient = field(
        default_factory=lambda: httpx.AsyncClient(trust_env=False, timeout=10)
    )

    @property
    def home(self) -> Path:
        """HOME of every dstack process (its ~/.dstack and ~/.cache live here)."""
        return self.workdir / "home"

    @property
    def catalog(self) -> Path:
        """Where GPUHUNT_CATALOG_URL points (file://)."""
        return self.workdir / "gpuhunt-catalog"

    def env(self) -> dict[str, str]:
        """The environment of every dstack process: nothing of the user's, loopback only."""
        return loopback_env(
            self.home,
            PYTHONPATH=str(DSTACK_SITE),  # sitecustomize.py: the base URL, nothing else
            BENCH_VERDA_BASE_URL=f"http://127.0.0.1:{self.sim_port}/verda/v1",
            GPUHUNT_CATALOG_URL=self.catalog.as_uri(),
            DSTACK_SERVER_DIR=str(self.workdir / "server"),
            DSTACK_SERVER_ADMIN_TOKEN=DSTACK_TOKEN,
            DSTACK_DEFAULT_CREDS_DISABLED="1",
            DSTACK_SERVER_LOG_FORMAT="standard",
            DSTACK_SERVER_LOG_LEVEL="INFO",
            VERDA_CLIENT_ID=CLIENT_ID,  # read by gpuhunt's collector only
            VERDA_CLIENT_SECRET=CLIENT_SECRET,
        )

    def ensure(self) -> None:
        """bench/peers/.venv-dstack with dstack[verda]==DSTACK_VERSION."""
        check = "import dstack.version, gpuhunt, verda; print(dstack.version.__version__)"
        ensure_venv(DSTACK_VENV, f"dstack[verda]=={DSTACK_VERSION}", check, DSTACK_VERSION)

    def build_catalog(self) -> int:
        """gpuhunt's Verda catalog, collected from the simulator by gpuhunt itself, laid out as
        its S3 bucket is (`<provider>/version`, `<provider>/<version>/catalog.zip`); every other
        offline provider gets an empty one. Returns the number of Verda offers."""
        csv = self.workdir / "verda.csv"
        subprocess.run(
            [dstack_bin("python"), "-m", "gpuhunt", "verda", "--output", str(csv)],
            env=self.env(),
            check=True,
            timeout=120,
            capture_output=True,
        )
        header = csv.read_text().splitlines()[0] + "\n"
        code = "from gpuhunt._internal.catalog import OFFLINE_PROVIDERS as p; print(*p)"
        listed = run_cli([dstack_bin("python"), "-c", code], self.env(), self.workdir)
        version = time.strftime("sim-%Y%m%d-%H%M%S")
        for provider in listed.stdout.split():
            where = self.catalog / provider / version
            where.mkdir(parents=True)
            with zipfile.ZipFile(where / "catalog.zip", "w") as archive:
                body = csv.read_text() if provider == "verda" else header
                archive.writestr(f"{provider}.csv", body)
            (self.catalog / provider / "version").write_text(version + "\n")
        return len(csv.read_text().splitlines()) - 1

    def write_config(self) -> None:
        """The server's config.yml: one project, one `verda` backend with the simulator's creds,
        and the CLI's last update check marked done (it would ask get.dstack.ai)."""
        server = self.workdir / "server"
        server.mkdir(parents=True)
        (server / "config.yml").write_text(
            "projects:\n"
            "- name: main\n"
            "  backends:\n"
            "  - type: verda\n"
            "    creds:\n"
            "      type: api_key\n"
            f"      client_id: {CLIENT_ID}\n"
            f"      client_secret: {CLIENT_SECRET}\n"
        )
        (self.workdir / "cli").mkdir()
        self.touch_update_check()

    def touch_update_check(self) -> None:
        """dstack's CLI checks for a new version once a day unless this file is from today."""
        path = self.home / ".cache" / ".dstack" / "cli" / "last_check"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    async def start(self, sim: SimControl, processes: Processes) -> dict[str, Any]:
        """The catalog, the config, `dstack server` on 127.0.0.1:port, answering."""
        self.workdir.mkdir(parents=True)
        offers = await asyncio.to_thread(self.build_catalog)
        log(f"dstack: gpuhunt collected {offers} Verda offers from the simulator")
        self.write_config()
        command = [dstack_bin("dstack"), "server", "--host", "127.0.0.1", "--port", str(self.port)]
        command += ["--token", DSTACK_TOKEN, "-y"]
        processes.start(command, self.env(), self.workdir / "server" / "dstack-server.log")
        await wait_answering(f"http://127.0.0.1:{self.port}/", processes)
        log(f"dstack: server on :{self.port}")
        return {"dstack_verda_offers_in_gpuhunt_catalog": offers}

    def cli(self, *args: str, timeout: float = 120) -> str:
        """Run the dstack CLI (against this server); its output, or raise with it."""
        self.touch_update_check()
        command = [dstack_bin("dstack"), *args]
        return run_cli(command, self.env(), self.workdir / "cli", timeout).stdout

    def submit_sync(self, number: int) -> None:
        """A new fleet (0..1 nodes) and a task run in it waiting for the machine."""
        fleet, run = f"bench-r{number}", f"bench-task-r{number}"
        common = (
            f"backends: [verda]\nregions: [{REGION}]\ninstance_types: [{SKU}]\n"
            f"spot_policy: on-demand\nresources:\n  gpu: {DSTACK_GPU}:1\n"
        )
        fleet_file = self.workdir / "cli" / f"{fleet}.dstack.yml"
        fleet_file.write_text(f"type: fleet\nname: {fleet}\nnodes: 0..1\n{common}")
        run_file = self.workdir / "cli" / f"{run}.dstack.yml"
        run_file.write_text(
            f"type: task\nname: {run}\ncommands:\n  - nvidia-smi\nfleets: [{fleet}]\n"
            f"max_price: {MAX_PRICE}\n{common}"
            "retry:\n  on_events: [no-capacity]\n  duration: 2h\n"
        )
        self.cli("apply", "-f", str(fleet_file), "-y")
        self.cli("apply", "-f", str(run_file), "-y", "-d")

    async def submit(self, number: int) -> None:
        """`submit_sync` off the event loop."""
        await asyncio.to_thread(self.submit_sync, number)

    async def run_info(self, number: int) -> dict[str, Any]:
        """Round `number`'s run as the server's API shows it."""
        answer = await self.client.post(
            f"http://127.0.0.1:{self.port}/api/project/main/runs/get",
            json={"run_name": f"bench-task-r{number}"},
            headers={"Authorization": f"Bearer {DSTACK_TOKEN}"},
        )
        answer.raise_for_status()
        info: dict[str, Any] = answer.json()
        return info

    async def until_waiting(self, number: int, sim: SimControl, processes: Processes) -> None:
        """Waiting means: the run has been refused for no capacity once and is `pending`."""
        deadline = time.monotonic() + 180
        while (await self.run_info(number))["status"] != "pending":
            processes.check()
            if time.monotonic() > deadline:
                raise RuntimeError(f"dstack run of round {number} not pending after 180 s")
            await asyncio.sleep(1)

    def owns(self, number: int, vm_name: str) -> bool:
        """dstack names its VMs `dstack-<project>-...`; one dstack run is live at a time."""
        return vm_name.startswith("dstack-")

    async def attempts_before_stock(self, number: int, creates: list[dict[str, Any]]) -> int:
        """Submissions of the run so far (dstack sends no create while it sees no stock)."""
        return submissions(await self.run_info(number))

    async def end_round(self, number: int) -> None:
        """The run aborted."""
        await asyncio.to_thread(self.cli, "stop", "-x", f"bench-task-r{number}", "-y")

    async def stop(self) -> None:
        """The API client closed (the server is killed with the other processes)."""
        await self.client.aclose()
