"""Chaos: the service as users run it, for `--minutes`, while replicas die and providers
misbehave, with every money invariant checked as it runs and at the end.

The simulators run in their own process; the service runs as two replicas on PostgreSQL
(`--database postgres`) or one process on an SQLite file (`--database sqlite`). Webhook
receivers and event-stream clients run in this process. All of it on 127.0.0.1. At random
(seeded), continuously: orders placed (single machines, clusters, alternatives, some with a
runtime limit), cancelled and terminated; top-ups, and accounts left to run out of money;
stock bursts and droughts; every fault kind at every provider (create refusals apart, see
CHAOS_FAULTS); latency spikes; replicas SIGKILLed (the lease holder half the time) and
restarted; receivers down or slow; streams
dropped and resumed. Every `--check-seconds` the rules in `chaos_checks.py` are checked; at the
end (`chaos_end.py`) the chaos stops, stock and money come back, every waiting order must
deploy at its providers' pace, every machine is terminated, and the rules are checked again
with those that need quiet (nothing left behind, every event delivered and streamed once).
The world (replicas, simulators, receivers, stream clients) is `chaos_world.py`.

A broken rule stops the run: it prints the rule, the last things that happened and the seed;
the same seed replays the same schedule of actions (their timing differs from run to run).

    .venv/bin/python bench/chaos.py --minutes 3 --database sqlite --seed 1
    .venv/bin/python bench/chaos.py --minutes 60 --database postgres [--json out.json]
"""

import argparse
import asyncio
import contextlib
import json
import random
import sys
import tempfile
import time
import uuid
from collections import Counter
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

from chaos_billed import HOUR_SECONDS, paid_against_billed
from chaos_checks import GONE, Broken, Checker
from chaos_end import END_SECONDS, END_STOCK, LIVE, Ending, database_counts, until
from chaos_world import (
    Api,
    History,
    Receiver,
    Replica,
    StreamClient,
    replicas_for,
    start_simulators,
)
from common import git_revision, pg_admin, stop
from sqlalchemy import select
from sqlalchemy.engine import make_url

from app.api.schemas import MAX_CREDIT
from app.simulators.control import SimControl
from app.simulators.faults import FAULT_KINDS, draw_fault_arguments
from app.storage.models import Lease

# Every fault kind but create refusals: a refused offer rests with backoff (80 s and more), past
# what the end's waiting rule allows; the rule must learn that rest before they join.
CHAOS_FAULTS = tuple(kind for kind in FAULT_KINDS if kind != "create_refused")

# (provider, sku, region): the kinds of machine the orders below want.
STOCK = [
    ("verda", "1H100.80S.30V", "FIN-01"),
    ("hyperstack", "n3-H100x1", "CANADA-1"),
    ("quantacloud", "h100-sxm-x1", "us-midwest-4"),
    ("verda", "16H200", "FIN-01"),
]
H100 = {"gpu_model": "H100", "gpu_count": 1, "max_price_per_hour": "3.00"}
HYPER_PAIR = {"gpu_model": "H100", "gpu_count": 1, "nodes": 2, "providers": ["hyperstack"],
              "max_price_per_hour": "6.00"}  # fmt: skip
VERDA_PAIR = {"gpu_model": "H200", "gpu_count": 8, "nodes": 2, "providers": ["verda"],
              "max_price_per_hour": "70.00"}  # fmt: skip
ACCOUNTS = [("rich", "400"), ("rich", "400"), ("poor", "12"), ("poor", "12")]


def order_body(rng: random.Random) -> dict[str, Any]:
    """One order a user might place: a single machine at some providers, a cluster, or two
    alternatives; a third of them with a runtime limit."""
    kind = rng.choices(["single", "hyper_pair", "verda_pair", "alternatives"], [6, 2, 1, 2])[0]
    providers = ["verda", "hyperstack", "quantacloud"]
    if kind == "single":
        body: dict[str, Any] = {**H100, "providers": rng.sample(providers, rng.randint(1, 3))}
    elif kind == "hyper_pair":
        body = dict(HYPER_PAIR)
    elif kind == "verda_pair":
        body = dict(VERDA_PAIR)
    else:
        body = {"alternatives": [{**H100, "providers": ["verda"]}, HYPER_PAIR],
                "prefer": rng.choice(["cheapest", "listed"])}  # fmt: skip
    if rng.random() < 0.33:
        body["max_runtime_hours"] = str(rng.choice([1, 2, 3, 5]))
    return body


class Chaos:
    """One run: the world, the actions, the checks, the drain and the report."""

    def __init__(self, args: argparse.Namespace, workdir: Path, database_url: str) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.history = History()
        self.workdir = workdir
        self.database_url = database_url
        self.counts: Counter[str] = Counter()
        self.paid_billed: dict[str, Any] = {}  # what accounts paid and providers billed, at the end
        self.accounts: list[dict[str, Any]] = []
        self.receivers: dict[str, Receiver] = {}  # endpoint id -> its receiver
        self.streams: list[StreamClient] = []
        self.orders: list[tuple[str, str]] = []  # (account key, order id)
        self.broken: list[Broken] = []
        self._tasks: list[asyncio.Task[Any]] = []

    # --- the run ---------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        sim_process, sim_port = await start_simulators(self.workdir, self.database_url)
        count = 2 if self.args.database == "postgres" else 1
        self.replicas = replicas_for(self.database_url, count, sim_port, self.workdir)
        self.sim = SimControl(base_url=f"http://127.0.0.1:{sim_port}")
        try:
            # The simulators bill on the service's hour, so their bills compare with its ledger.
            await self.sim.reset_all(boot_seconds=1.0, hour_seconds=HOUR_SECONDS)
            for provider in SimControl.providers():
                await self.sim.balance(provider, "100000000")
            for replica in self.replicas:
                await replica.start()
            self.api = Api(self.replicas, self.history, self.rng)
            self.checker = Checker(self.database_url, self.sim, settle_seconds=60)
            try:
                await self._setup_accounts()
                started = time.monotonic()
                await self._chaos(started + self.args.minutes * 60)
                self.counts["chaos_seconds"] = round(time.monotonic() - started)
                if not self.broken:
                    await self._drain()
                return await self._report()
            finally:
                for task in self._tasks:
                    task.cancel()
                await asyncio.gather(*self._tasks, return_exceptions=True)
                for receiver in self.receivers.values():
                    if receiver.server is not None:
                        receiver.server.should_exit = True
                await self.api.aclose()
                await self.checker.aclose()
        finally:
            for replica in self.replicas:
                replica.stop()
            await self.sim.aclose()
            stop(sim_process, self.workdir / "sim.log")

    def _spawn(self, coroutine: Any) -> None:
        self._tasks.append(asyncio.create_task(coroutine))

    async def _setup_accounts(self) -> None:
        for n, (kind, credit) in enumerate(ACCOUNTS):
            made = await self.api.call("POST", "/v1/accounts", body={"name": f"chaos {kind} {n}"})
            assert made is not None and made.status_code == 201, made
            account = made.json()
            await self._top_up(account["id"], credit)
            receiver = Receiver(f"hook-{n}", account["api_key"])
            self._spawn(receiver.serve())
            while receiver.server is None or not receiver.server.started:
                await asyncio.sleep(0.05)
            endpoint = await self.api.call(
                "POST", "/v1/webhook-endpoints", key=account["api_key"], body={"url": receiver.url}
            )
            assert endpoint is not None and endpoint.status_code == 201, endpoint
            receiver.secret = endpoint.json()["secret"]
            self.receivers[endpoint.json()["id"]] = receiver
            stream = StreamClient(f"stream-{n}", account["api_key"])
            self.streams.append(stream)
            self._spawn(stream.run(self.replicas, random.Random(self.rng.random()), self.history))
            self.accounts.append(account)

    async def _top_up(self, account_id: str, amount: str | Decimal, *, tries: int = 6) -> bool:
        """Credit `amount` in credits the API takes (up to MAX_CREDIT each); True if all landed.
        Each credit is retried under its idempotency key, so a lost answer never pays twice."""
        path = f"/v1/accounts/{account_id}/credits"
        left, landed = Decimal(amount), True
        while left > 0:
            credit = min(left, MAX_CREDIT)
            answer = await self.api.call("POST", path, body={"amount": str(credit)}, tries=tries)
            landed = landed and answer is not None and answer.status_code == 201
            left -= credit
        return landed

    async def _chaos(self, until: float) -> None:
        """Act at random until `until`, checking the rules every `--check-seconds`."""
        self._spawn(self._kills(until))
        next_check = time.monotonic() + self.args.check_seconds
        while time.monotonic() < until and not self.broken:
            await self._act()
            await asyncio.sleep(self.rng.expovariate(1 / self.args.act_seconds))
            if time.monotonic() >= next_check:
                await self._check()
                next_check = time.monotonic() + self.args.check_seconds

    async def _check(self, *, final: bool = False) -> None:
        found = await self.checker.all_now() if not final else []
        found += [Broken("api_5xx", e) for e in self.api.server_errors]
        self.api.server_errors.clear()
        self.counts["checks"] += 1
        if found:
            self.broken += found

    # --- the actions -----------------------------------------------------------------------

    async def _act(self) -> None:
        actions = {
            self._place: 30, self._cancel: 6, self._terminate: 8, self._top_up_some: 5,
            self._stock: 16, self._drought: 4, self._fault: 14, self._latency: 3,
            self._receiver_mode: 5, self._drop_stream: 5,
        }  # fmt: skip
        action = self.rng.choices(list(actions), list(actions.values()))[0]
        self.counts[action.__name__.strip("_")] += 1
        await action()

    async def _place(self) -> None:
        account = self.rng.choice(self.accounts)
        body = order_body(self.rng)
        answer = await self.api.call("POST", "/v1/orders", key=account["api_key"], body=body)
        if answer is not None and answer.status_code == 201:
            self.orders.append((account["api_key"], answer.json()["id"]))

    async def _cancel(self) -> None:
        if self.orders:
            key, order_id = self.rng.choice(self.orders)
            await self.api.call("POST", f"/v1/orders/{order_id}/cancel", key=key)

    async def _terminate(self) -> None:
        if self.orders:
            key, order_id = self.rng.choice(self.orders)
            await self.api.call("POST", f"/v1/orders/{order_id}/terminate", key=key)

    async def _top_up_some(self) -> None:
        account = self.rng.choice(self.accounts)
        await self._top_up(account["id"], self.rng.choice(["5", "20", "50"]))

    async def _stock(self) -> None:
        provider, sku, region = self.rng.choice(STOCK)
        quantity = self.rng.randint(1, 4)
        self.history.add(f"stock {provider} {sku} {region} = {quantity}")
        await self.sim.stock(provider, sku, region, quantity)

    async def _drought(self) -> None:
        for provider, sku, region in STOCK:
            await self.sim.stock(provider, sku, region, 0)
        self.history.add("drought: no stock anywhere")

    async def _fault(self) -> None:
        provider = self.rng.choice(SimControl.providers())
        kind = self.rng.choice(CHAOS_FAULTS)
        extra = draw_fault_arguments(self.rng, kind)
        self.counts[f"fault {kind}"] += 1
        self.history.add(f"fault {provider} {kind} {extra}")
        await self.sim.fault(provider, kind, **extra)

    async def _latency(self) -> None:
        provider = self.rng.choice(SimControl.providers())
        spike = self.rng.choice([200, 800, 2000])
        self.history.add(f"latency {provider} {spike} ms for a while")
        await self.sim.config(provider, latency_ms=spike, jitter_ms=spike // 4)

        async def calm() -> None:
            await asyncio.sleep(self.rng.uniform(3, 15))
            await self.sim.config(provider, latency_ms=0, jitter_ms=0)

        self._spawn(calm())

    async def _receiver_mode(self) -> None:
        """A receiver goes down or slow for up to 20 s (less than the retries last)."""
        receiver = self.rng.choice(list(self.receivers.values()))
        if receiver.mode != "up":
            return
        receiver.mode = self.rng.choice(["down", "slow"])
        self.history.add(f"receiver {receiver.name} {receiver.mode}")

        async def back_up(seconds: float) -> None:
            await asyncio.sleep(seconds)
            receiver.mode = "up"
            self.history.add(f"receiver {receiver.name} up")

        self._spawn(back_up(self.rng.uniform(2, 20)))

    async def _drop_stream(self) -> None:
        stream = self.rng.choice(self.streams)
        stream.drop_now.set()
        self.history.add(f"stream {stream.name} dropped on purpose")

    async def _kills(self, until: float) -> None:
        """SIGKILL a replica now and then (the lease holder half the time), restart it soon."""
        while time.monotonic() < until:
            await asyncio.sleep(self.rng.uniform(10, 30))
            if time.monotonic() >= until:
                return
            victim = await self._victim()
            self.history.add(f"SIGKILL {victim.name}")
            victim.kill()
            self.counts["kills"] += 1
            await asyncio.sleep(self.rng.uniform(1, 6))
            await victim.start()
            self.history.add(f"restarted {victim.name}")

    async def _victim(self) -> Replica:
        if len(self.replicas) > 1 and self.rng.random() < 0.5:
            async with self.checker.engine.connect() as connection:
                holder = (
                    await connection.execute(select(Lease.holder).where(Lease.name == "watcher"))
                ).scalar()
            pid = int(holder.split(":")[1]) if holder else None
            for replica in self.replicas:
                if replica.process is not None and replica.process.pid == pid:
                    self.counts["lease_holder_kills"] += 1
                    return replica
        return self.rng.choice(self.replicas)

    # --- the end ---------------------------------------------------------------------------

    async def _drain(self) -> None:
        """Stop the chaos, give every waiting order its stock, end every machine, and check
        what needs quiet."""
        ending = Ending(self.checker.engine, self.api, self.accounts, self.orders)
        for task in self._tasks[:]:
            if task.get_coro().__name__ == "_kills":  # type: ignore[union-attr]
                task.cancel()
        for replica in self.replicas:
            if not replica.alive:
                await replica.start()
        for receiver in self.receivers.values():
            receiver.mode = "up"
        for provider in SimControl.providers():
            await self.sim.config(provider, latency_ms=0, jitter_ms=0)
        for account_id, amount in (await ending.final_top_ups()).items():
            if not await self._top_up(account_id, amount, tries=60):
                self.broken.append(Broken("api_unanswered", f"top-up of {account_id} failed"))
        for provider, sku, region in STOCK:
            await self.sim.stock(provider, sku, region, END_STOCK)
        waiting_since = time.monotonic()
        stalled = await ending.stalled_waiting()
        self.counts["wait_seconds"] = round(time.monotonic() - waiting_since)
        if stalled:
            waiting = await ending.orders_in(["waiting"], only=stalled)
            self.broken.append(
                Broken(
                    "order_stuck_waiting",
                    f"{len(stalled)} still waiting with stock, such as {waiting}; "
                    f"available: {await ending.funds()}",
                )
            )
        # A machine that deploys after its order was sent a terminate is terminated then.
        ending_since = time.monotonic()
        ended = await until(ending.end_every_order, END_SECONDS)
        self.counts["end_seconds"] = round(time.monotonic() - ending_since)
        if not ended:
            stuck = await ending.orders_in(LIVE)
            self.broken.append(Broken("order_stuck", f"not ended after terminate: {stuck}"))
        await until(self._no_live_vms, 60)
        self.broken += await self.checker.vm_owners(final=True)
        await until(self._no_billed_volumes, 60)  # left behind ones: the reconciler's (5 s)
        self.broken += await self.checker.volumes()
        self.broken += await self.checker.money()
        self.paid_billed, unbilled = await paid_against_billed(self.checker.engine, self.sim)
        self.broken += unbilled
        await until(self._webhooks_quiet, 120)
        self.broken += await self.checker.webhooks(self._accepted())
        for stream, account in zip(self.streams, self.accounts, strict=True):
            truth = await ending.event_ids(account["api_key"])
            await until(partial(_caught_up, stream, truth), 30)
            self.broken += Checker.stream(stream.name, stream.ids, truth)
        await self._check(final=True)

    async def _no_live_vms(self) -> bool:
        return not [vm for vm in await self.checker._sim_vms() if vm[3] not in GONE]

    async def _no_billed_volumes(self) -> bool:
        return not await self.checker.billed_volumes()

    def _accepted(self) -> dict[str, set[str]]:
        """What each endpoint's receiver accepted, by endpoint id."""
        return {e: r.accepted for e, r in self.receivers.items()}

    async def _webhooks_quiet(self) -> bool:
        return not await self.checker.webhooks(self._accepted())

    async def _report(self) -> dict[str, Any]:
        self.counts.update(await database_counts(self.checker.engine))
        self.counts["webhooks_accepted"] = sum(len(r.accepted) for r in self.receivers.values())
        self.counts["stream_events"] = sum(len(s.ids) for s in self.streams)
        self.counts["stream_resumes"] = sum(s.resumes for s in self.streams)
        self.counts["api_requests"] = self.api.requests
        self.counts["api_503_overloaded"] = self.api.overloaded
        checks = dict(self.checker.runs)
        return {
            "revision": git_revision(),
            "database": self.args.database,
            "replicas": len(self.replicas),
            "seed": self.args.seed,
            "minutes": self.args.minutes,
            "counts": dict(sorted(self.counts.items())),
            "checks": checks,
            "paid_against_billed": self.paid_billed,
            "broken": [{"rule": b.rule, "detail": b.detail} for b in self.broken],
            "history": list(self.history.lines)[-120:] if self.broken else [],
        }


async def _caught_up(stream: StreamClient, truth: list[int]) -> bool:
    """The stream client has seen the last event the API lists (all of them, if none)."""
    return bool(stream.ids) and stream.ids[-1] >= truth[-1] if truth else True


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        if args.database == "sqlite":
            return await Chaos(args, workdir, f"sqlite+aiosqlite:///{workdir / 'chaos.db'}").run()
        name = f"ap_chaos_{uuid.uuid4().hex[:12]}"
        await pg_admin(args.postgres_url, f'CREATE DATABASE "{name}"')
        url = make_url(args.postgres_url).set(database=name).render_as_string(hide_password=False)
        try:
            return await Chaos(args, workdir, url).run()
        finally:
            if args.keep:
                sys.stdout.write(f"kept the database {name} (drop it when done)\n")
            else:
                with contextlib.suppress(Exception):
                    await pg_admin(
                        args.postgres_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
                    )


def print_report(report: dict[str, Any]) -> None:
    """The counts, the checks and any broken rule, as a person reads them."""
    out = sys.stdout.write
    out(f"chaos on {report['database']} ({report['replicas']} replicas), seed {report['seed']}, "
        f"{report['minutes']} min, {report['revision']}\n")  # fmt: skip
    for name, value in report["counts"].items():
        out(f"  {name:28} {value}\n")
    for name, value in report["paid_against_billed"].items():
        out(f"  {name:28} {value}\n")
    for name, value in report["checks"].items():
        out(f"  check {name:22} {value} times\n")
    if report["broken"]:
        out("what happened last:\n" + "\n".join(report["history"]) + "\n")
    # The broken rules come last, after the history: CI keeps only the tail of what a run prints.
    out(f"broken invariants: {len(report['broken'])}\n")
    for broken in report["broken"]:
        out(f"  BROKEN {broken['rule']}: {broken['detail']}\n")
    if report["broken"]:
        out(f"replay with --seed {report['seed']}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument(
        "--postgres-url", default="postgresql+asyncpg://postgres@127.0.0.1:5432/test"
    )
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    parser.add_argument("--check-seconds", type=float, default=5.0)
    parser.add_argument("--act-seconds", type=float, default=0.4, help="mean time between actions")
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the logs (and the SQLite file) in this directory, and the PostgreSQL database",
    )
    args = parser.parse_args()
    if not 0 < args.minutes <= 24 * 60:
        parser.error("--minutes must be above 0 and at most a day (the run is bounded)")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 2**31)
    sys.stdout.write(f"seed {args.seed}\n")
    sys.stdout.flush()
    report = asyncio.run(run(args))
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if report["broken"] else 0


if __name__ == "__main__":
    sys.exit(main())
