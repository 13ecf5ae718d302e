"""Stock to create, dstack 0.22.5 against autoprovision, on the same simulated Verda machine.

Starts the simulators (`autoprovision sim`), our service (`autoprovision serve`, demo mode
pointed at them) and a real dstack server (`dstack server`, from its own virtualenv, with its
own temporary server dir and HOME) whose `verda` backend talks to the Verda simulator. Each
round both tools wait for the same machine (1A6000.10V in FIN-01, out of stock): one of our
orders (RTX-A6000 x1, Verda, FIN-01, max $5.00/h) and one dstack task run with
`retry: {on_events: [no-capacity]}` in a fleet limited to that instance type and region. After a
random wait two units appear (PUT /verda/_sim/stock) and the simulator's own log
(GET /verda/_sim/creates) says when each tool's create arrived: ours are named `ap-...`,
dstack's `dstack-...`. Delay = received_at - changed_at, per tool.

What is not dstack as shipped (see bench/peers/README.md):
- API base URL: the `verda` SDK reads no variable for it, so `dstack_site/sitecustomize.py`
  (on PYTHONPATH of the dstack processes only) changes `VerdaClient`'s default `base_url` to
  `BENCH_VERDA_BASE_URL`, and refuses anything that is not 127.0.0.1.
- gpuhunt catalog: dstack reads Verda offers from gpuhunt's published catalog (S3). The script
  builds it the way it is published, with gpuhunt's own collector (`python -m gpuhunt verda`)
  run against the simulator, and serves it through GPUHUNT_CATALOG_URL=file://... (the other
  providers' catalogs are empty files). Availability still comes live from
  /instance-availability, as dstack always does.
- The simulator's boot time is set to 10^6 s: VMs stay `ordered`, so no answer ever carries an
  IP and dstack never tries to SSH into one (its IPs are 203.0.113.x, not loopback). Verda
  (and the simulator) refuses to delete an instance still provisioning, so each round's VMs are
  left there; the run is aborted, the order cancelled if still waiting, the stock set to 0.

dstack re-tries a pending run after 15 s, 30 s, 1, 2, 5 then every 10 min (its
`_PENDING_RETRY_DELAYS`), and caches a backend's offers and availability for 180 s, so its
delay grows with how long the run has waited before the stock appears (`--wait-min/--wait-max`,
after both tools are waiting); the short default waits are its favourable case.

    .venv/bin/python bench/peers/dstack_vs_autoprovision.py --rounds 5 \
        --json bench/results/peer_dstack.json [--wait-min 60 --wait-max 300] \
        [--round-timeout 600] [--fixed]

The first run creates bench/peers/.venv-dstack (`python -m venv`, then
`pip install "dstack[verda]==0.22.5"`); later runs reuse it.
"""

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import ROOT, free_port, git_revision, service_env, sim_ready_url

from app.simulators.control import SimControl

DSTACK_VERSION = "0.22.5"
PEERS = Path(__file__).resolve().parent
DSTACK_VENV = PEERS / ".venv-dstack"
DSTACK_SITE = PEERS / "dstack_site"
ADMIN_KEY = "bench-admin-key-0123456789"
DSTACK_TOKEN = "bench-dstack-admin-token"
SKU, REGION, GPU_MODEL, DSTACK_GPU = "1A6000.10V", "FIN-01", "RTX-A6000", "A6000"
MAX_PRICE = "5.00"
BOOT_SECONDS = 1_000_000  # never `running`: no IP, so dstack never SSHes anywhere
# Any stray HTTP(S) from the dstack processes goes to a closed loopback port.
DEAD_PROXY = "http://127.0.0.1:9"


def log(message: str) -> None:
    """One progress line on stderr, with the time."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)  # noqa: T201


# --- dstack's virtualenv ---------------------------------------------------------------------


def dstack_bin(name: str) -> str:
    """A program in the dstack virtualenv."""
    return str(DSTACK_VENV / "bin" / name)


def ensure_dstack() -> None:
    """Create bench/peers/.venv-dstack with dstack[verda]==DSTACK_VERSION, unless it is there."""
    check = [
        dstack_bin("python"),
        "-c",
        "import dstack.version, gpuhunt, verda; print(dstack.version.__version__)",
    ]
    if (DSTACK_VENV / "bin" / "python").exists():
        found = subprocess.run(check, capture_output=True, text=True, timeout=120)
        if found.returncode == 0 and found.stdout.strip() == DSTACK_VERSION:
            return
    log(f"installing dstack {DSTACK_VERSION} into {DSTACK_VENV} (PyPI)")
    subprocess.run([sys.executable, "-m", "venv", str(DSTACK_VENV)], check=True, timeout=300)
    subprocess.run(
        [dstack_bin("pip"), "install", "-q", f"dstack[verda]=={DSTACK_VERSION}"],
        check=True,
        timeout=1200,
    )
    subprocess.run(check, check=True, timeout=120)


# --- processes -------------------------------------------------------------------------------


@dataclass
class Processes:
    """Every process this script started, stopped (their whole process group) at exit."""

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


# --- dstack's side ---------------------------------------------------------------------------


@dataclass
class Dstack:
    """A dstack server in `workdir`, and its CLI."""

    workdir: Path
    sim_port: int
    port: int = field(default_factory=free_port)

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
        keep = ("PATH", "LANG", "LC_ALL", "TERM", "TZ")
        env = {k: v for k, v in os.environ.items() if k in keep}
        env.update(
            {
                "HOME": str(self.home),
                "PYTHONPATH": str(DSTACK_SITE),  # sitecustomize.py: the base URL, nothing else
                "BENCH_VERDA_BASE_URL": f"http://127.0.0.1:{self.sim_port}/verda/v1",
                "GPUHUNT_CATALOG_URL": self.catalog.as_uri(),
                "DSTACK_SERVER_DIR": str(self.workdir / "server"),
                "DSTACK_SERVER_ADMIN_TOKEN": DSTACK_TOKEN,
                "DSTACK_DEFAULT_CREDS_DISABLED": "1",
                "DSTACK_SERVER_LOG_FORMAT": "standard",
                "DSTACK_SERVER_LOG_LEVEL": "INFO",
                "HTTP_PROXY": DEAD_PROXY,
                "HTTPS_PROXY": DEAD_PROXY,
                "http_proxy": DEAD_PROXY,
                "https_proxy": DEAD_PROXY,
                "NO_PROXY": "127.0.0.1,localhost",
                "no_proxy": "127.0.0.1,localhost",
                "VERDA_CLIENT_ID": "sim-client",  # read by gpuhunt's collector only
                "VERDA_CLIENT_SECRET": "sim-secret",
            }
        )
        return env

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
        listed = subprocess.run(
            [
                dstack_bin("python"),
                "-c",
                "from gpuhunt._internal.catalog import OFFLINE_PROVIDERS as p; print(*p)",
            ],
            env=self.env(),
            check=True,
            timeout=120,
            capture_output=True,
            text=True,
        )
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
            "      client_id: sim-client\n"
            "      client_secret: sim-secret\n"
        )
        (self.workdir / "cli").mkdir()
        self.touch_update_check()

    def touch_update_check(self) -> None:
        """dstack's CLI checks for a new version once a day unless this file is from today."""
        path = self.home / ".cache" / ".dstack" / "cli" / "last_check"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def start(self, processes: Processes) -> subprocess.Popen[bytes]:
        """`dstack server` on 127.0.0.1:port."""
        command = [dstack_bin("dstack"), "server", "--host", "127.0.0.1", "--port", str(self.port)]
        command += ["--token", DSTACK_TOKEN, "-y"]
        return processes.start(command, self.env(), self.workdir / "server" / "dstack-server.log")

    def cli(self, *args: str, timeout: float = 120) -> str:
        """Run the dstack CLI (against this server); its output, or raise with it."""
        self.touch_update_check()
        done = subprocess.run(
            [dstack_bin("dstack"), *args],
            cwd=self.workdir / "cli",
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"dstack {' '.join(args)}: {done.stdout}\n{done.stderr}")
        return done.stdout

    def submit(self, round_no: int) -> str:
        """A new fleet (0..1 nodes) and a task run in it waiting for the machine; the run name."""
        fleet, run = f"bench-r{round_no}", f"bench-task-r{round_no}"
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
        return run

    async def run_info(self, client: httpx.AsyncClient, run: str) -> dict[str, Any]:
        """The run as the server's API shows it."""
        answer = await client.post(
            f"http://127.0.0.1:{self.port}/api/project/main/runs/get",
            json={"run_name": run},
            headers={"Authorization": f"Bearer {DSTACK_TOKEN}"},
        )
        answer.raise_for_status()
        info: dict[str, Any] = answer.json()
        return info


def submissions(info: dict[str, Any]) -> int:
    """How many times the run's job has been submitted (provisioning attempts): the newest
    submission's `submission_num` plus one (the API may list only the latest submissions)."""
    numbers = [s["submission_num"] for job in info["jobs"] for s in job["job_submissions"]]
    return max(numbers, default=-1) + 1


# --- one round -------------------------------------------------------------------------------


@dataclass
class Round:
    """What one round measured."""

    number: int
    wait_s: float
    dstack_attempts_before_stock: int
    delay_s: dict[str, float | None] = field(default_factory=dict)
    outcome: dict[str, str] = field(default_factory=dict)


def tool_of(create: dict[str, Any]) -> str | None:
    """`ours` or `dstack` by the VM name each gives (`ap-<order>-<n>`, `dstack-<project>-...`)."""
    name = str(create.get("name") or "")
    if name.startswith("ap-"):
        return "ours"
    if name.startswith("dstack-"):
        return "dstack"
    return None


async def one_round(
    number: int,
    args: argparse.Namespace,
    api: httpx.AsyncClient,
    key: str,
    sim: SimControl,
    dstack: Dstack,
    processes: Processes,
) -> Round:
    """Both tools waiting, stock after a random wait, each tool's first create after it."""
    await sim.stock("verda", SKU, REGION, 0)
    headers = {"Authorization": f"Bearer {key}"}
    order_body = {
        "gpu_model": GPU_MODEL,
        "gpu_count": 1,
        "providers": ["verda"],
        "regions": [REGION],
        "max_price_per_hour": MAX_PRICE,
        "name": f"peer bench round {number}",
    }
    placed = await api.post("/v1/orders", json=order_body, headers=headers)
    placed.raise_for_status()
    order = placed.json()["id"]
    run = await asyncio.to_thread(dstack.submit, number)
    async with httpx.AsyncClient(trust_env=False, timeout=10) as client:
        # Waiting means: the run has been refused for no capacity once and is `pending`.
        deadline = time.monotonic() + 180
        while (info := await dstack.run_info(client, run))["status"] != "pending":
            processes.check()
            if time.monotonic() > deadline:
                raise RuntimeError(f"dstack run {run} not pending after 180 s: {info['status']}")
            await asyncio.sleep(1)
        status = (await api.get(f"/v1/orders/{order}", headers=headers)).json()["status"]
        if status != "waiting":
            raise RuntimeError(f"order {order} is {status}, not waiting")
        wait = random.uniform(args.wait_min, args.wait_max)
        log(f"round {number}: both waiting; stock in {wait:.0f} s")
        until = time.monotonic() + wait
        while (left := until - time.monotonic()) > 0:  # the random moment, processes watched
            processes.check()
            await asyncio.sleep(min(left, 1.0))
        attempts = submissions(await dstack.run_info(client, run))
        before = len(await sim.creates("verda"))
        changed_at = await sim.stock("verda", SKU, REGION, 2)
        result = Round(number, round(wait, 1), attempts)
        deadline = time.monotonic() + args.round_timeout
        while len(result.delay_s) < 2 and time.monotonic() < deadline:
            processes.check()
            for create in (await sim.creates("verda"))[before:]:
                tool = tool_of(create)
                if tool is not None and tool not in result.delay_s:
                    result.delay_s[tool] = round(create["received_at"] - changed_at, 3)
                    result.outcome[tool] = create["outcome"]
                    log(f"round {number}: {tool} create after {result.delay_s[tool]:.2f} s")
            await asyncio.sleep(0.2)
        for tool in ("ours", "dstack"):
            if tool not in result.delay_s:
                result.delay_s[tool] = None
                result.outcome[tool] = f"no create within {args.round_timeout:g} s"
                log(f"round {number}: {tool}: no create within {args.round_timeout:g} s")
        # Between rounds: no stock, the run aborted, the order cancelled if it still waits.
        await sim.stock("verda", SKU, REGION, 0)
        await asyncio.to_thread(dstack.cli, "stop", "-x", run, "-y")
        status = (await api.get(f"/v1/orders/{order}", headers=headers)).json()["status"]
        if status == "waiting":
            (await api.post(f"/v1/orders/{order}/cancel", headers=headers)).raise_for_status()
    return result


# --- the whole run ---------------------------------------------------------------------------


def median_or_none(values: list[float | None]) -> float | None:
    """The median of the values that are not None."""
    found = [v for v in values if v is not None]
    return round(statistics.median(found), 3) if found else None


def summary(rounds: list[Round], args: argparse.Namespace, facts: dict[str, Any]) -> dict[str, Any]:
    """The JSON report."""
    ours = median_or_none([r.delay_s["ours"] for r in rounds])
    theirs = median_or_none([r.delay_s["dstack"] for r in rounds])
    return {
        "what": "stock appears -> create request reaches the Verda simulator, seconds",
        "machine": {"sku": SKU, "region": REGION, "units_put_in_stock": 2},
        "dstack_version": DSTACK_VERSION,
        "autoprovision_revision": git_revision(),
        "autoprovision_polling": "fixed default periods" if args.fixed else "planned (poll budget)",
        "wait_between_waiting_and_stock_s": [args.wait_min, args.wait_max],
        "round_timeout_s": args.round_timeout,
        **facts,
        "rounds": [r.__dict__ for r in rounds],
        "median_s": {"ours": ours, "dstack": theirs},
        "ratio_dstack_over_ours": round(theirs / ours, 1) if ours and theirs else None,
        "no_create": {
            tool: sum(1 for r in rounds if r.delay_s[tool] is None) for tool in ("ours", "dstack")
        },
    }


def print_table(report: dict[str, Any]) -> None:
    """The report as a Markdown table."""

    def cell(value: float | None) -> str:
        return "no create" if value is None else f"{value:.2f} s"

    lines = [
        "",
        "| round | wait before stock | dstack attempts so far | ours | dstack | dstack / ours |",
        "|---|---|---|---|---|---|",
    ]
    for r in report["rounds"]:
        ours, theirs = r["delay_s"]["ours"], r["delay_s"]["dstack"]
        ratio = f"{theirs / ours:.0f}x" if ours and theirs else "-"
        lines.append(
            f"| {r['number']} | {r['wait_s']:.0f} s | {r['dstack_attempts_before_stock']} | "
            f"{cell(ours)} | {cell(theirs)} | {ratio} |"
        )
    median = report["median_s"]
    ratio = report["ratio_dstack_over_ours"]
    lines.append(
        f"| **median** | | | {cell(median['ours'])} | {cell(median['dstack'])} | "
        f"{'-' if ratio is None else f'{ratio:.0f}x'} |"
    )
    print("\n".join(lines))  # noqa: T201


@contextmanager
def cleanup(processes: Processes) -> Iterator[None]:
    """Stop every started process on the way out, SIGTERM to this script included."""
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        yield
    finally:
        processes.stop_all()
        signal.signal(signal.SIGTERM, previous)


async def run(args: argparse.Namespace, processes: Processes, workdir: Path) -> dict[str, Any]:
    """Start everything, play the rounds, return the report (written after each round)."""
    sim_port, api_port = free_port(), free_port()
    env = service_env(f"sqlite+aiosqlite:///{workdir / 'bench.db'}", ADMIN_KEY, sim_port, api_port)
    if args.fixed:
        env["AUTOPROVISION_POLL_PLAN"] = "false"
    env["PYTHONPATH"] = str(ROOT)
    app = [sys.executable, "-m", "app"]
    processes.start([*app, "sim", "--port", str(sim_port)], env, workdir / "sim.log")
    await wait_answering(sim_ready_url(sim_port), processes)
    sim_root = f"http://127.0.0.1:{sim_port}"
    async with (
        SimControl(base_url=sim_root, timeout=10) as sim,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_port}", timeout=10) as api,
    ):
        await sim.config("verda", boot_seconds=BOOT_SECONDS)
        dstack = Dstack(workdir / "dstack", sim_port)
        dstack.workdir.mkdir()
        offers = await asyncio.to_thread(dstack.build_catalog)
        log(f"gpuhunt collected {offers} Verda offers from the simulator")
        dstack.write_config()
        dstack.start(processes)
        processes.start([*app, "serve"], env, workdir / "service.log")
        await wait_answering(f"http://127.0.0.1:{api_port}/healthz", processes)
        await wait_answering(f"http://127.0.0.1:{dstack.port}/", processes)
        log(f"up: simulators :{sim_port}, service :{api_port}, dstack :{dstack.port} ({workdir})")
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        account = (await api.post("/v1/accounts", json={"name": "peer"}, headers=admin)).json()
        await api.post(
            f"/v1/accounts/{account['id']}/credits", json={"amount": "100000"}, headers=admin
        )
        facts = {"verda_offers_in_gpuhunt_catalog": offers, "workdir": str(workdir)}
        rounds: list[Round] = []
        report = summary(rounds, args, facts)
        for number in range(1, args.rounds + 1):
            rounds.append(
                await one_round(number, args, api, account["api_key"], sim, dstack, processes)
            )
            report = summary(rounds, args, facts)
            if args.json:
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps(report, indent=2) + "\n")
        report["rate_limited_429s"] = (await sim.config("verda"))["refused_by_rate_limits"]
    return report


def main() -> int:
    """Parse the flags, run, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="stock appearances")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--wait-min", type=float, default=60.0, help="s waiting before stock")
    parser.add_argument("--wait-max", type=float, default=300.0, help="s waiting before stock")
    parser.add_argument(
        "--round-timeout", type=float, default=600.0, help="s after the stock to give up on a tool"
    )
    parser.add_argument(
        "--fixed", action="store_true", help="our service at its fixed default poll periods"
    )
    args = parser.parse_args()
    if not 0 <= args.wait_min <= args.wait_max:
        parser.error("need 0 <= --wait-min <= --wait-max")
    ensure_dstack()
    workdir = Path(tempfile.mkdtemp(prefix="ap-peer-dstack-"))
    processes = Processes()
    with cleanup(processes):
        report = asyncio.run(run(args, processes, workdir))
    print_table(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
