"""The world a chaos run drives: the simulators and the service's replicas as their own
processes, an API client that spreads requests over the live replicas and keeps every answer,
webhook receivers that check signatures (and can be down or slow), and event-stream clients
that drop and resume. Everything listens and connects on 127.0.0.1 only."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any

import httpx
import uvicorn
from common import free_port, service_env, sim_ready_url, start, wait_up
from httpx_sse import aconnect_sse
from standardwebhooks import Webhook, WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

ADMIN_KEY = "chaos-admin-key-0123456789abcdef"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}

# The service as a busy operator would tune it for a short run: hours of 10 s, so machines bill
# many hours; quick follow-ups, takeovers and webhook retries, so every rule is exercised within
# minutes. Untracked VMs are deleted (an operator who cares about money turns that on). The
# outcome window stays at its default (10 s): it must outlast how late a provider makes a VM
# (here up to 4 s of create delay and 2.5 s of latency), or a create looked up too early is
# released while its VM appears afterwards, which at a provider that can neither name nor tag
# VMs (QuantaCloud) nobody can tell apart from a stranger's (a 60-minute run found that with 2 s).
SERVICE_SETTINGS = {
    "AUTOPROVISION_BILLING_HOUR_SECONDS": "10",
    "AUTOPROVISION_FOLLOW_SECONDS": "0.5",
    "AUTOPROVISION_RECONCILE_SECONDS": "5",
    "AUTOPROVISION_RUNNING_CHECK_SECONDS": "2",
    "AUTOPROVISION_LEADER_LEASE_SECONDS": "4",
    "AUTOPROVISION_DELETE_UNTRACKED_VMS": "true",
    # About a minute of retries: longer than a receiver is ever left down or slow here.
    "AUTOPROVISION_WEBHOOK_RETRY_SCHEDULE": "[0, 1, 2, 3, 5, 10, 10, 10, 10, 10]",
    "AUTOPROVISION_WEBHOOK_TIMEOUT_SECONDS": "3",
    "AUTOPROVISION_PROVIDER_BALANCE_SECONDS": "5",
}


class History:
    """The last things that happened (actions, answers, faults, kills), to print when a rule
    breaks, so the run can be read back and replayed with the same seed."""

    def __init__(self, keep: int = 400) -> None:
        self.started = time.monotonic()
        self.lines: deque[str] = deque(maxlen=keep)

    def add(self, what: str) -> None:
        """Note one thing, with the seconds since the run began."""
        self.lines.append(f"{time.monotonic() - self.started:8.2f}s  {what}")


@dataclass
class Replica:
    """One `autoprovision serve` process (restarted in place after a kill)."""

    name: str
    port: int
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    async def start(self) -> None:
        """Start it and wait until it answers."""
        command = [sys.executable, "-m", "app", "serve"]
        with self.log.open("ab") as log:
            log.write(f"\n--- started at {time.time():.3f}\n".encode())
        self.process = subprocess.Popen(
            command,
            cwd=self.log.parent,
            env={**self.env, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
        )
        await wait_up(f"{self.url}/healthz", self.process)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no lease given up, whatever was in flight stays there."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 30 s."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()


class Api:
    """Requests to whichever replica is up; every answer is kept, and any 5xx but a
    `503 overloaded` is a broken rule. Every POST carries an idempotency key, so retrying it on
    another replica after a lost answer (an order placed, a top-up) acts once."""

    def __init__(self, replicas: list[Replica], history: History, rng: Random) -> None:
        self.replicas = replicas
        self.history = history
        self.rng = rng
        self.client = httpx.AsyncClient(timeout=15)
        self.requests = 0
        self.server_errors: list[str] = []
        self.overloaded = 0

    async def aclose(self) -> None:
        await self.client.aclose()

    async def call(
        self, method: str, path: str, *, key: str | None = None, body: Any = None, tries: int = 6
    ) -> httpx.Response | None:
        """The answer of a live replica, or None when none answered in `tries` tries."""
        headers = {"Authorization": f"Bearer {key or ADMIN_KEY}"}
        if method == "POST":
            headers["Idempotency-Key"] = uuid.uuid4().hex
        for attempt in range(tries):
            live = [r for r in self.replicas if r.alive] or self.replicas
            replica = self.rng.choice(live)
            try:
                answer = await self.client.request(
                    method, replica.url + path, json=body, headers=headers
                )
            except httpx.TransportError as exc:
                self.history.add(f"{method} {path} @{replica.name}: {type(exc).__name__}")
                await asyncio.sleep(0.2 * (attempt + 1))
                continue
            self.requests += 1
            self.history.add(f"{method} {path} @{replica.name}: {answer.status_code}")
            if answer.status_code >= 500:
                if answer.status_code == 503 and "overloaded" in answer.text:
                    self.overloaded += 1
                    await asyncio.sleep(0.2 * (attempt + 1))
                    continue
                self.server_errors.append(f"{method} {path}: {answer.status_code} {answer.text}")
            return answer
        return None


@dataclass
class Receiver:
    """A webhook receiver on its own port: checks each delivery's signature and keeps the ids
    it accepted. `mode` is `up`, `down` (answers 503) or `slow` (answers after a few seconds,
    past the service's timeout)."""

    name: str
    account_key: str = ""
    secret: str = ""
    mode: str = "up"
    accepted: set[str] = field(default_factory=set)
    bad_signatures: int = 0
    port: int = field(default_factory=free_port)
    server: uvicorn.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def _hook(self, request: Request) -> Response:
        body = await request.body()
        if self.mode == "down":
            return Response(status_code=503)
        if self.mode == "slow":
            await asyncio.sleep(5)
        try:
            Webhook(self.secret).verify(body, dict(request.headers))
        except WebhookVerificationError:
            self.bad_signatures += 1
            return Response(status_code=400)
        self.accepted.add(request.headers["webhook-id"])
        return Response(status_code=204)

    async def serve(self) -> None:
        """Serve until stopped (its task is cancelled or `server.should_exit` set)."""
        app = Starlette(routes=[Route("/hook", self._hook, methods=["POST"])])
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error")
        self.server = uvicorn.Server(config)
        await self.server.serve()


@dataclass
class StreamClient:
    """Holds `GET /v1/events/stream` open on some replica; when it drops (or is dropped on
    purpose) it resumes with `Last-Event-ID` on another. Keeps the ids it got, in order."""

    name: str
    account_key: str
    ids: list[int] = field(default_factory=list)
    resumes: int = 0
    drop_now: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, replicas: list[Replica], rng: Random, history: History) -> None:
        """Read, drop, resume, until cancelled. The first connection asks for every event
        from the start (`Last-Event-ID: 0`), so none published before it is missed."""
        while True:
            live = [r for r in replicas if r.alive]
            if not live:
                await asyncio.sleep(0.5)
                continue
            replica = rng.choice(live)
            self.drop_now.clear()
            reading = asyncio.create_task(self._read(replica.url))
            dropping = asyncio.create_task(self.drop_now.wait())
            await asyncio.wait({reading, dropping}, return_when=asyncio.FIRST_COMPLETED)
            for task in (reading, dropping):
                task.cancel()
            results = await asyncio.gather(reading, dropping, return_exceptions=True)
            if isinstance(results[0], Exception):
                what = type(results[0]).__name__
                history.add(f"stream {self.name} @{replica.name} dropped: {what}")
            self.resumes += 1
            await asyncio.sleep(rng.uniform(0.1, 1.0))

    async def _read(self, base_url: str) -> None:
        headers = {
            "Authorization": f"Bearer {self.account_key}",
            "Last-Event-ID": str(self.ids[-1] if self.ids else 0),
        }
        async with (
            httpx.AsyncClient(base_url=base_url, timeout=30) as client,
            aconnect_sse(client, "GET", "/v1/events/stream", headers=headers) as source,
        ):
            async for sse in source.aiter_sse():
                if sse.data:  # heartbeats come as empty events
                    self.ids.append(int(json.loads(sse.data)["id"]))


async def start_simulators(workdir: Path, database_url: str) -> tuple[subprocess.Popen[bytes], int]:
    """The simulators in their own process; their port."""
    port = free_port()
    env = service_env(database_url, ADMIN_KEY, port, free_port())
    process = start(
        [sys.executable, "-m", "app", "sim", "--port", str(port)], env, workdir / "sim.log"
    )
    await wait_up(sim_ready_url(port), process)
    return process, port


def replicas_for(database_url: str, count: int, sim_port: int, workdir: Path) -> list[Replica]:
    """`count` replicas of the service on `database_url`, pointed at the simulators."""
    made = []
    for n in range(count):
        port = free_port()
        env = service_env(database_url, ADMIN_KEY, sim_port, port, **SERVICE_SETTINGS)
        made.append(Replica(f"r{n + 1}", port, env, workdir / f"replica-{n + 1}.log"))
    return made
