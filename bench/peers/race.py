"""Stock to create on the same simulated Verda machine: autoprovision against dstack 0.22.5 and
SkyPilot 0.14.1, all three waiting in the same rounds.

Starts the simulators (`autoprovision sim`), our service (`autoprovision serve`, demo mode
pointed at them) and each peer's server from its own virtualenv (`peer_dstack.py`,
`peer_skypilot.py`), each peer's Verda backend talking to the Verda simulator. Each round every
tool waits for the same machine (1A6000.10V in FIN-01, out of stock): one of our orders
(RTX-A6000 x1, Verda, FIN-01, max $5.00/h), one dstack task run with
`retry: {on_events: [no-capacity]}`, one `sky launch --retry-until-up`. After a random wait one
unit per tool appears (PUT /verda/_sim/stock) and the simulator's own log
(GET /verda/_sim/creates) says when each tool's first create after it arrived, told apart by
the VM name each gives (`ap-...`, `dstack-...`, `sky-bench-r<N>-...`).
Delay = received_at - changed_at, per tool.

The simulator's boot time is set to 10^6 s: VMs stay `ordered`, so no answer ever carries an
IP and no tool tries to SSH into one (its IPs are 203.0.113.x, not loopback). Verda (and the
simulator) refuses to delete an instance still provisioning, so each round's VMs are left
there; each peer's request is stopped, the order cancelled if still waiting, the stock set to 0.

    .venv/bin/python bench/peers/race.py --rounds 5 --json bench/results/peer_race.json \
        [--peers dstack,skypilot] [--wait-min 60 --wait-max 300] [--round-timeout 600] [--fixed]

The first run creates bench/peers/.venv-dstack and bench/peers/.venv-skypilot (`python -m
venv`, then `pip install "dstack[verda]==0.22.5"` and `"skypilot[verda]==0.14.1"`); later runs
reuse them.
"""

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import ROOT, free_port, git_revision, service_env, sim_ready_url
from peer_dstack import Dstack
from peer_skypilot import SkyPilot
from race_common import (
    BOOT_SECONDS,
    GPU_MODEL,
    MAX_PRICE,
    REGION,
    SKU,
    Peer,
    Processes,
    cleanup,
    kill_leftovers,
    log,
    wait_answering,
)

from app.simulators.control import SimControl

ADMIN_KEY = "bench-admin-key-0123456789"
# name -> the peer, made with (its work directory, the simulators' port, a port for its server)
PEER_CLASSES: dict[str, Callable[[Path, int, int], Peer]] = {"dstack": Dstack, "skypilot": SkyPilot}
LABELS = {"ours": "ours", "dstack": "dstack", "skypilot": "SkyPilot"}


@dataclass
class Round:
    """What one round measured."""

    number: int
    wait_s: float
    attempts_before_stock: dict[str, int] = field(default_factory=dict)
    delay_s: dict[str, float | None] = field(default_factory=dict)
    outcome: dict[str, str] = field(default_factory=dict)


@dataclass
class Ours:
    """Our service's API, with the account whose orders race."""

    api: httpx.AsyncClient
    key: str

    async def order(self, number: int) -> str:
        """A new order for the machine; its id."""
        body = {
            "gpu_model": GPU_MODEL,
            "gpu_count": 1,
            "providers": ["verda"],
            "regions": [REGION],
            "max_price_per_hour": MAX_PRICE,
            "name": f"peer race round {number}",
        }
        placed = await self.api.post("/v1/orders", json=body, headers=self.headers)
        placed.raise_for_status()
        order: str = placed.json()["id"]
        return order

    async def status(self, order: str) -> str:
        answer = await self.api.get(f"/v1/orders/{order}", headers=self.headers)
        status: str = answer.raise_for_status().json()["status"]
        return status

    async def cancel(self, order: str) -> None:
        """Cancel the order if it still waits."""
        if await self.status(order) == "waiting":
            cancelled = await self.api.post(f"/v1/orders/{order}/cancel", headers=self.headers)
            cancelled.raise_for_status()

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


def tool_of(number: int, name: str, peers: list[Peer]) -> str | None:
    """Which tool a create of round `number` with this VM name is from (ours: `ap-...`)."""
    if name.startswith("ap-"):
        return "ours"
    return next((p.name for p in peers if p.owns(number, name)), None)


async def one_round(
    number: int,
    args: argparse.Namespace,
    ours: Ours,
    sim: SimControl,
    peers: list[Peer],
    processes: Processes,
) -> Round:
    """Every tool waiting, stock after a random wait, each tool's first create after it."""
    await sim.stock("verda", SKU, REGION, 0)
    order = await ours.order(number)
    await asyncio.gather(*(p.submit(number) for p in peers))
    await asyncio.gather(*(p.until_waiting(number, sim, processes) for p in peers))
    if (status := await ours.status(order)) != "waiting":
        raise RuntimeError(f"order {order} is {status}, not waiting")
    wait = random.uniform(args.wait_min, args.wait_max)
    log(f"round {number}: all waiting; stock in {wait:.0f} s")
    until = time.monotonic() + wait
    while (left := until - time.monotonic()) > 0:  # the random moment, processes watched
        processes.check()
        await asyncio.sleep(min(left, 1.0))
    so_far = await sim.creates("verda")
    result = Round(number, round(wait, 1))
    for peer in peers:
        result.attempts_before_stock[peer.name] = await peer.attempts_before_stock(number, so_far)
    tools = ["ours", *(p.name for p in peers)]
    changed_at = await sim.stock("verda", SKU, REGION, len(tools))
    deadline = time.monotonic() + args.round_timeout
    while len(result.delay_s) < len(tools) and time.monotonic() < deadline:
        processes.check()
        for create in (await sim.creates("verda"))[len(so_far) :]:
            tool = tool_of(number, str(create.get("name") or ""), peers)
            if tool is None or tool in result.delay_s or create["received_at"] < changed_at:
                continue
            result.delay_s[tool] = round(create["received_at"] - changed_at, 3)
            result.outcome[tool] = create["outcome"]
            log(f"round {number}: {tool} create after {result.delay_s[tool]:.2f} s")
        await asyncio.sleep(0.2)
    for tool in tools:
        if tool not in result.delay_s:
            result.delay_s[tool] = None
            result.outcome[tool] = f"no create within {args.round_timeout:g} s"
            log(f"round {number}: {tool}: no create within {args.round_timeout:g} s")
    result.delay_s = {t: result.delay_s[t] for t in tools}  # in the tools' order
    result.outcome = {t: result.outcome[t] for t in tools}
    # Between rounds: no stock, each peer's request stopped, the order cancelled if it waits.
    await sim.stock("verda", SKU, REGION, 0)
    for peer in peers:
        await peer.end_round(number)
    await ours.cancel(order)
    return result


# --- the report ------------------------------------------------------------------------------


def median_or_none(values: list[float | None]) -> float | None:
    """The median of the values that are not None."""
    found = [v for v in values if v is not None]
    return round(statistics.median(found), 3) if found else None


def summary(
    rounds: list[Round], args: argparse.Namespace, peers: list[Peer], facts: dict[str, Any]
) -> dict[str, Any]:
    """The JSON report."""
    tools = ["ours", *(p.name for p in peers)]
    medians = {t: median_or_none([r.delay_s[t] for r in rounds]) for t in tools}
    ours = medians["ours"]
    return {
        "what": "stock appears -> create request reaches the Verda simulator, seconds",
        "machine": {"sku": SKU, "region": REGION, "units_put_in_stock": len(tools)},
        "tools": tools,
        "versions": {p.name: p.version for p in peers},
        "autoprovision_revision": git_revision(),
        "autoprovision_polling": "fixed default periods" if args.fixed else "planned (poll budget)",
        "wait_between_waiting_and_stock_s": [args.wait_min, args.wait_max],
        "round_timeout_s": args.round_timeout,
        **facts,
        "rounds": [r.__dict__ for r in rounds],
        "median_s": medians,
        "ratio_of_medians_over_ours": {
            p.name: round(m / ours, 1) if ours and (m := medians[p.name]) else None for p in peers
        },
        "no_create": {t: sum(1 for r in rounds if r.delay_s[t] is None) for t in tools},
    }


def print_table(report: dict[str, Any]) -> None:
    """The report as a Markdown table."""
    peers = report["tools"][1:]

    def cell(value: float | None) -> str:
        return "no create" if value is None else f"{value:.2f} s"

    def ratio(theirs: float | None, ours: float | None) -> str:
        return f"{theirs / ours:,.0f}x" if ours and theirs else "-"

    names = [LABELS[t] for t in report["tools"]]
    head = ["round", "waiting before stock", *(f"{LABELS[p]} tries" for p in peers), *names]
    head += [f"{LABELS[p]} / ours" for p in peers]
    lines = ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in report["rounds"]:
        delays = r["delay_s"]
        row = [str(r["number"]), f"{r['wait_s']:.0f} s"]
        row += [str(r["attempts_before_stock"][p]) for p in peers]
        row += [cell(delays[t]) for t in report["tools"]]
        row += [ratio(delays[p], delays["ours"]) for p in peers]
        lines.append("| " + " | ".join(row) + " |")
    medians = report["median_s"]
    row = ["**median**", "", *("" for _ in peers), *(cell(medians[t]) for t in report["tools"])]
    row += [ratio(medians[p], medians["ours"]) + " (of the medians)" for p in peers]
    lines.append("| " + " | ".join(row) + " |")
    print("\n".join(lines))  # noqa: T201


# --- the whole run ---------------------------------------------------------------------------


async def run(
    args: argparse.Namespace, peers: list[Peer], processes: Processes, workdir: Path, sim_port: int
) -> dict[str, Any]:
    """Start everything, play the rounds, return the report (written after each round)."""
    api_port = free_port()
    env = service_env(f"sqlite+aiosqlite:///{workdir / 'bench.db'}", ADMIN_KEY, sim_port, api_port)
    if args.fixed:
        env["AUTOPROVISION_POLL_PLAN"] = "false"
    env["PYTHONPATH"] = str(ROOT)
    app = [sys.executable, "-m", "app"]
    processes.start([*app, "sim", "--port", str(sim_port)], env, workdir / "sim.log")
    await wait_answering(sim_ready_url(sim_port), processes)
    async with (
        SimControl(base_url=f"http://127.0.0.1:{sim_port}", timeout=10) as sim,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_port}", timeout=10) as api,
    ):
        await sim.config("verda", boot_seconds=BOOT_SECONDS)
        facts: dict[str, Any] = {"workdir": str(workdir)}
        try:
            for peer in peers:  # one at a time: SkyPilot's catalog puts one unit in stock
                facts |= await peer.start(sim, processes)
            processes.start([*app, "serve"], env, workdir / "service.log")
            await wait_answering(f"http://127.0.0.1:{api_port}/healthz", processes)
            log(f"up: simulators :{sim_port}, service :{api_port} ({workdir})")
            admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
            account = (await api.post("/v1/accounts", json={"name": "peer"}, headers=admin)).json()
            credits = {"amount": "100000"}
            await api.post(f"/v1/accounts/{account['id']}/credits", json=credits, headers=admin)
            ours = Ours(api, account["api_key"])
            rounds: list[Round] = []
            report = summary(rounds, args, peers, facts)
            for number in range(1, args.rounds + 1):
                rounds.append(await one_round(number, args, ours, sim, peers, processes))
                report = summary(rounds, args, peers, facts)
                if args.json:
                    args.json.parent.mkdir(parents=True, exist_ok=True)
                    args.json.write_text(json.dumps(report, indent=2) + "\n")
            report["rate_limited_429s"] = (await sim.config("verda"))["refused_by_rate_limits"]
        finally:
            for peer in peers:
                await peer.stop()
    return report


def main() -> int:
    """Parse the flags, run, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="stock appearances")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--peers", default="dstack,skypilot", help="comma-separated: dstack, skypilot"
    )
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
    names = [n.strip() for n in args.peers.split(",") if n.strip()]
    if not names or len(set(names)) != len(names) or set(names) - set(PEER_CLASSES):
        parser.error(f"--peers: a comma-separated list of {', '.join(PEER_CLASSES)}")
    workdir = Path(tempfile.mkdtemp(prefix="ap-peer-race-"))
    sim_port = free_port()
    peers = [PEER_CLASSES[n](workdir / n, sim_port, free_port()) for n in names]
    for peer in peers:
        peer.ensure()
    processes = Processes()
    try:
        with cleanup(processes):
            report = asyncio.run(run(args, peers, processes, workdir, sim_port))
    finally:
        for peer in peers:
            if killed := kill_leftovers(peer.home):
                log(f"{peer.name}: {killed} leftover process(es) with its HOME killed")
    print_table(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
