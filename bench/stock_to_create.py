"""How fast does new stock turn into a create call? Measured end to end over HTTP.

Starts the provider simulators (`autoprovision sim`) and the service (`autoprovision serve`,
pointed at them) as separate processes, keeps one order per provider waiting, puts one machine
in stock at a random moment, and takes the time from the stock change to the create request's
arrival from the simulator's own log. Repeats ROUNDS times per provider, all three providers at
once, and prints median and p99 against the targets. It also times the service's own share of
each: from the stock read's answer reaching the service (the simulator's log says when it left;
add one one-way latency) to the create reaching the simulator; the target is one one-way
latency plus 25 ms at p99.

By default no poll period is set: the service plans its stock reads from each provider's
published limits (the poll budget), and the targets are issue 15's. With --fixed the periods are
the ones used before the budget (Verda 1.25 s, the others 0.5 s), and the targets are those
periods' bound (median <= period/2 + 50 ms, p99 <= period + 150 ms). Each provider's 429s
(`refused_by_rate_limits` in its simulator's config) are reported too.

With --latency-ms N (and --jitter-ms J, --tls) the simulators sit behind a loopback relay that
delays every byte by N/2 ms each way (`autoprovision sim --latency-ms`), over HTTPS with a
certificate the service trusts through AUTOPROVISION_PROVIDER_CA_FILE; the run without them
comes first, in the same session, and the network run's target is its medians plus N ms.

    .venv/bin/python bench/stock_to_create.py [--rounds 200] [--fixed] [--latency-ms 40 --tls] \
        [--verda-types 2] [--json bench/results/latest.json]

With --against REV (and --pairs N, 2 by default) it runs REV, from a git worktree, and this
checkout alternately N times each on loopback, and prints each provider's mean median before
and after and their ratio; it fails when a median is more than 10 % slower.

BENCH_LOG_LEVEL=debug (default warning) sets the service's log level, for looking into a slow
round; its log is service.log in the run's temporary directory.
"""

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from common import (
    ROOT,
    free_port,
    git_revision,
    is_stock_read_path,
    period_variables,
    planned_periods,
    service_env,
    sim_ready_url,
    stop,
    wait_up,
)
from common import start as start_process
from prometheus_client.parser import text_string_to_metric_families

from app.providers.http import provider_tls
from app.simulators.control import SimControl

ADMIN_KEY = "bench-admin-key-0123456789"
FIXED_BEFORE = {"verda": 1.25, "hyperstack": 0.5, "quantacloud": 0.5}  # before the budget
PLANNED_TARGETS_MS = {"verda": (350, 800), "hyperstack": (200, 450), "quantacloud": (225, 500)}
# One cheap machine per provider, so a few hundred first hours cost little of the credit.
MACHINES = {
    "verda": {"sku": "1A6000.10V", "region": "FIN-01", "gpu_model": "RTX-A6000"},
    "hyperstack": {"sku": "n3-RTX-A6000x1", "region": "CANADA-1", "gpu_model": "RTX-A6000"},
    "quantacloud": {"sku": "l40s-x1", "region": "us-east-1", "gpu_model": "L40S"},
}
# With --verda-types 2: an order for this machine waits too (it never appears), so the budget
# reads a second type's path besides the full list and the measured type's.
SECOND_VERDA_MACHINE = {"gpu_model": "H100", "gpu_count": 1}


def start(
    args: list[str], env: dict[str, str], log: Path, root: Path = ROOT
) -> subprocess.Popen[bytes]:
    """`autoprovision <args>` of the code at `root` as a process of its own, output in `log`."""
    return start_process([sys.executable, "-m", "app", *args], env, log, root)


async def one_provider(
    provider: str,
    rounds: int,
    period: float,
    pace: float,
    api: httpx.AsyncClient,
    sim: SimControl,
    key: str,
) -> tuple[list[float], list[float]]:
    machine = MACHINES[provider]
    headers = {"Authorization": f"Bearer {key}"}
    sku, region = machine["sku"], machine["region"]
    latencies, own = [], []
    for _ in range(rounds):
        body = {
            "gpu_model": machine["gpu_model"],
            "gpu_count": 1,
            "providers": [provider],
            "max_price_per_hour": "5.00",
        }
        placed = await api.post("/v1/orders", json=body, headers=headers)
        placed.raise_for_status()
        # Stock appears at a random moment of the poll cycle: anywhere in two periods, after
        # the watcher has had time to see the new order (it is nudged when one is placed), and
        # `pace` seconds after the last round: each round makes a VM, and each VM's create,
        # status reads and balance read count against the same limits as the stock reads.
        await asyncio.sleep(pace + random.uniform(0, 2 * period))
        seen = len(await sim.creates(provider))
        changed_at = await sim.stock(provider, sku, region, 1)
        deadline = time.monotonic() + 15
        while True:
            creates = await sim.creates(provider)
            if len(creates) > seen:
                arrived = creates[seen]["received_at"]
                latencies.append(arrived - changed_at)
                # The read the service acted on: the last stock read answered before the create.
                answered = [
                    r["answered_at"]
                    for r in await sim.requests(provider)
                    if is_stock_read_path(provider, r["path"])
                    and r["answered_at"] is not None
                    and changed_at <= r["answered_at"] <= arrived
                ]
                if answered:
                    own.append(arrived - max(answered))
                break
            if time.monotonic() > deadline:
                metrics = (await api.get("/metrics")).text.splitlines()
                why = [line for line in metrics if f'provider="{provider}"' in line]
                why += [str(r) for r in (await sim.requests(provider))[-40:]]
                raise RuntimeError(
                    f"{provider}: no create 15 s after stock appeared\n" + "\n".join(why)
                )
            await asyncio.sleep(0.1)
        await sim.stock(provider, sku, region, 0)
    return latencies, own


def connections_opened(metrics: str) -> dict[tuple[str, str], int]:
    """(provider, create|other) -> connections the service opened, from its /metrics."""
    opened: dict[tuple[str, str], int] = {}
    for family in text_string_to_metric_families(metrics):
        if family.name == "autoprovision_provider_connections_opened":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    key = (sample.labels["provider"], sample.labels["request"])
                    opened[key] = int(sample.value)
    return opened


def read_troubles(metrics: str) -> dict[tuple[str, str], int]:
    """(provider, errors|held) -> failed stock reads, and requests the service held back."""
    names = {
        "autoprovision_poll_errors_total": "errors",
        "autoprovision_provider_requests_held_total": "held",
    }
    found: dict[tuple[str, str], int] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name in names:
                key = (sample.labels["provider"], names[sample.name])
                found[key] = found.get(key, 0) + int(sample.value)
    return found


async def wait_for_file(path: Path, process: subprocess.Popen[bytes]) -> None:
    """Until `path` exists (the simulators write their certificate as they start)."""
    for _ in range(300):
        if path.exists():
            return
        if process.poll() is not None:
            raise RuntimeError("the simulators exited early")
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{path} did not appear")


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[98]


@dataclass(frozen=True)
class Network:
    """What stands between the service and the simulators."""

    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    tls: bool = False

    def sim_args(self, workdir: Path) -> list[str]:
        args = ["--latency-ms", str(self.latency_ms), "--jitter-ms", str(self.jitter_ms)]
        return [*args, "--tls", "--cert-dir", str(workdir / "tls")] if self.tls else args

    def describe(self) -> str:
        if not (self.latency_ms or self.jitter_ms or self.tls):
            return "loopback, plain HTTP"
        where = f"{self.latency_ms:g} ms round trip (+ up to {self.jitter_ms:g} ms)"
        return f"{where}, {'HTTPS' if self.tls else 'plain HTTP'}"


async def run(
    rounds: int,
    periods: dict[str, float],
    network: Network = Network(),
    *,
    planned: bool,
    pace: float,
    verda_types: int = 1,
    root: Path = ROOT,
) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="ap-bench-"))
    sim_port, api_port = free_port(), free_port()
    env = service_env(
        f"sqlite+aiosqlite:///{workdir / 'bench.db'}",
        ADMIN_KEY,
        sim_port,
        api_port,
        AUTOPROVISION_LOG_LEVEL=os.environ.get("BENCH_LOG_LEVEL", "warning"),
        **({"AUTOPROVISION_POLL_PLAN": "true"} if planned else period_variables(periods)),
    )
    verify = provider_tls(None)
    if network.tls:
        ca_file = workdir / "tls" / "sim-cert.pem"
        env.update(
            {"AUTOPROVISION_SIM_TLS": "true", "AUTOPROVISION_PROVIDER_CA_FILE": str(ca_file)}
        )
    sim_root = f"{'https' if network.tls else 'http'}://127.0.0.1:{sim_port}"
    sim_args = ["sim", "--port", str(sim_port), *network.sim_args(workdir)]
    sim_process = start(sim_args, env, workdir / "sim.log", root)
    api_process = None
    try:
        if network.tls:
            await wait_for_file(ca_file, sim_process)
            verify = provider_tls(ca_file)
        await wait_up(sim_ready_url(sim_port, tls=network.tls), sim_process, verify=verify)
        api_process = start(["serve"], env, workdir / "service.log", root)
        await wait_up(f"http://127.0.0.1:{api_port}/healthz", api_process)
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_port}", timeout=10) as api,
            SimControl(base_url=sim_root, timeout=10, verify=verify) as sim,
        ):
            admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
            account = (await api.post("/v1/accounts", json={"name": "bench"}, headers=admin)).json()
            await api.post(
                f"/v1/accounts/{account['id']}/credits", json={"amount": "100000"}, headers=admin
            )
            if verda_types == 2:
                body = {**SECOND_VERDA_MACHINE, "providers": ["verda"], "max_price_per_hour": "5"}
                key = {"Authorization": f"Bearer {account['api_key']}"}
                (await api.post("/v1/orders", json=body, headers=key)).raise_for_status()
            results = await asyncio.gather(
                *(
                    one_provider(p, rounds, periods[p], pace, api, sim, account["api_key"])
                    for p in MACHINES
                )
            )
            metrics = (await api.get("/metrics")).text
            opened = connections_opened(metrics)
            troubles = read_troubles(metrics)
            refused = {p: (await sim.config(p))["refused_by_rate_limits"] for p in MACHINES}
    finally:
        for process in (api_process, sim_process):
            if process is not None:
                stop(process, workdir)
    report: dict[str, Any] = {
        "rounds": rounds,
        "network": network.describe(),
        "polling": "planned by the poll budget" if planned else "fixed periods",
        "pace_seconds": pace,
        "verda_types_watched": verda_types,
        "providers": {},
    }
    one_way = network.latency_ms / 2
    for provider, (samples, acted) in zip(MACHINES, results, strict=True):
        period = periods[provider]
        # From the read's answer reaching the service (one way after the simulator sent it)
        # to the create reaching the simulator.
        share = [seconds * 1000 - one_way for seconds in acted]
        median, tail = statistics.median(samples), p99(samples)
        target = (
            PLANNED_TARGETS_MS[provider]
            if planned
            else (
                (period / 2 + 0.05) * 1000,
                (period + 0.15) * 1000,
            )
        )
        report["providers"][provider] = {
            "poll_seconds": None if planned else period,
            "samples": len(samples),
            "median_ms": round(median * 1000, 1),
            "p99_ms": round(tail * 1000, 1),
            "target_median_ms": round(target[0], 1),
            "target_p99_ms": round(target[1], 1),
            "rate_limited_429s": refused[provider],
            "own_share_samples": len(share),
            "own_share_median_ms": round(statistics.median(share), 1) if share else None,
            "own_share_p99_ms": round(p99(share), 1) if len(share) > 1 else None,
            "own_share_target_p99_ms": round(one_way + 25, 1),
            "min_ms": round(min(samples) * 1000, 1),
            "max_ms": round(max(samples) * 1000, 1),
            "connections_opened_by_creates": opened.get((provider, "create"), 0),
            "connections_opened_by_other_requests": opened.get((provider, "other"), 0),
            "rounds_over_1s": sum(1 for s in samples if s > 1.0),
            "failed_stock_reads": troubles.get((provider, "errors"), 0),
            "requests_held_back": troubles.get((provider, "held"), 0),
        }
    return report


def print_table(report: dict[str, Any], base: dict[str, Any] | None, extra_ms: float) -> bool:
    """The report as a Markdown table; with `base`, targets are its medians plus `extra_ms`."""
    print(  # noqa: T201
        f"\n{report['network']}, {report['polling']}, {report['rounds']} rounds per provider"
    )
    header = "| provider | poll period | samples | median | target | p99 | target | met |"
    print(header + " 429s | own share p99 (target) | creates opening a connection |")  # noqa: T201
    print("|---|---|---|---|---|---|---|---|---|---|---|")  # noqa: T201
    met_all = True
    for provider, r in report["providers"].items():
        if base is not None:
            r["target_median_ms"] = round(base["providers"][provider]["median_ms"] + extra_ms, 1)
            r["target_p99_ms"] = round(base["providers"][provider]["p99_ms"] + extra_ms, 1)
        met = r["median_ms"] <= r["target_median_ms"] and r["p99_ms"] <= r["target_p99_ms"]
        met_all &= met
        print(  # noqa: T201
            f"| {provider} | {r['poll_seconds'] or 'planned'} | {r['samples']} | "
            f"{r['median_ms']} ms | <= {r['target_median_ms']} ms | {r['p99_ms']} ms | "
            f"<= {r['target_p99_ms']} ms | {'yes' if met else 'NO'} | "
            f"{r['rate_limited_429s']} | {r['own_share_p99_ms']} ms "
            f"(<= {r['own_share_target_p99_ms']} ms) | {r['connections_opened_by_creates']} |"
        )
    return met_all


def compare(
    against: str, pairs: int, rounds: int, periods: dict[str, float], **options: Any
) -> dict[str, Any]:
    """`against` (a git worktree of it) and this checkout, alternately, `pairs` times each, on
    loopback: each side's runs, and per provider the mean of its medians and their ratio."""
    worktree = Path(tempfile.mkdtemp(prefix="ap-bench-rev-")) / "tree"
    git = ["git", "-C", str(ROOT), "worktree"]
    subprocess.run([*git, "add", "--detach", str(worktree), against], check=True)
    sides: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    try:
        for _ in range(pairs):
            sides["before"].append(asyncio.run(run(rounds, periods, root=worktree, **options)))
            sides["after"].append(asyncio.run(run(rounds, periods, **options)))
    finally:
        subprocess.run([*git, "remove", "--force", str(worktree)], check=False)

    def mean(side: str, provider: str, field: str) -> float:
        values = [r["providers"][provider][field] for r in sides[side]]
        return round(statistics.fmean(v for v in values if v is not None), 1)

    summary = {
        provider: {
            "median_before_ms": mean("before", provider, "median_ms"),
            "median_after_ms": mean("after", provider, "median_ms"),
            "own_share_before_ms": mean("before", provider, "own_share_median_ms"),
            "own_share_after_ms": mean("after", provider, "own_share_median_ms"),
        }
        for provider in MACHINES
    }
    for figures in summary.values():
        figures["ratio"] = round(figures["median_after_ms"] / figures["median_before_ms"], 3)
    return {"before": against, "after": git_revision(), "summary": summary, "runs": sides}


def print_comparison(compared: dict[str, Any]) -> bool:
    """The comparison as a Markdown table: whether every median is within 10 % of before."""
    runs = len(compared["runs"]["before"])
    print(f"\n{compared['before']} (before) and {compared['after']} (after), {runs} runs each")  # noqa: T201
    print("| provider | median before | median after | ratio | own share before | after |")  # noqa: T201
    print("|---|---|---|---|---|---|")  # noqa: T201
    for provider, f in compared["summary"].items():
        print(  # noqa: T201
            f"| {provider} | {f['median_before_ms']} ms | {f['median_after_ms']} ms | "
            f"{f['ratio']} | {f['own_share_before_ms']} ms | {f['own_share_after_ms']} ms |"
        )
    return all(f["ratio"] <= 1.10 for f in compared["summary"].values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200, help="stock appearances per provider")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="round trip to add")
    parser.add_argument("--jitter-ms", type=float, default=0.0, help="up to this much more")
    parser.add_argument("--tls", action="store_true", help="the simulators over HTTPS")
    parser.add_argument("--fixed", action="store_true", help="the periods before the budget")
    parser.add_argument(
        "--pace", type=float, default=3.0, help="seconds between a round and the next stock"
    )
    parser.add_argument(
        "--verda-types",
        type=int,
        choices=(1, 2),
        default=1,
        help="Verda instance types orders wait for (2: one more, for a machine never in stock)",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--against", help="a git revision: run it and this checkout alternately (loopback)"
    )
    parser.add_argument("--pairs", type=int, default=2, help="with --against: runs of each")
    args = parser.parse_args()
    network = Network(args.latency_ms, args.jitter_ms, args.tls)
    planned = not args.fixed
    periods = planned_periods() if planned else FIXED_BEFORE
    options = {"planned": planned, "pace": args.pace, "verda_types": args.verda_types}
    if args.against:
        compared = compare(args.against, args.pairs, args.rounds, periods, **options)
        within = print_comparison(compared)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(compared, indent=2) + "\n")
        return 0 if within else 1
    base = asyncio.run(run(args.rounds, periods, **options))
    met = print_table(base, None, 0.0)
    results: dict[str, Any] = {"loopback": base}
    if network != Network():
        over = asyncio.run(run(args.rounds, periods, network, **options))
        met = print_table(over, base, args.latency_ms) and met
        results["network"] = over
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
