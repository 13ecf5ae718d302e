"""Demo mode: the simulators in-process, a demo account, demo orders and a stock feed."""

import asyncio
import base64
import contextlib
import contextvars
import logging
import random
import shlex
import socket
import ssl
import sys
from collections.abc import Awaitable, Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from sqlalchemy import select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.order_schemas import OrderCreate
from app.core.errors import TooManyOrders
from app.core.ids import new_id
from app.core.states import OrderStatus
from app.providers.registry import display_name, simulated_specs
from app.services import ledger, placing
from app.settings import Settings
from app.simulators import persist
from app.simulators.app import create_simulator_app
from app.simulators.control import SimControl
from app.simulators.core import ProviderSimulator
from app.storage.models import Account, Order
from app.support.secrets import SecretBox
from app.support.security import ACCOUNT_KEY_PREFIX, hash_api_key

log = logging.getLogger(__name__)
DEMO_ACCOUNT_NAME = "demo"
DEMO_CREDIT = Decimal("1000.00")
DEMO_KEY_PURPOSE = "autoprovision demo account API key"
STATE_SAVE_SECONDS = 5.0  # how often the embedded simulators' state is written down
DEMO_KEEP_SECONDS = 60.0  # how often the lease holder tops up the demo and places its orders
# What the demo's simulated provider that forecasts stock (Hyperstack's) says it plans of a GPU
# the demo orders want (region, its GPU name, what its stock answer says), so the Stock page
# has a forecast to show; the others have no forecast route and say 404.
DEMO_FORECAST = ("US-1", "B300-SXM", {"planned_7_days": "10+", "planned_30_days": "25+"})


def demo_orders() -> list[dict[str, Any]]:
    """The orders the demo account waits with, over the simulated providers in the registry's
    order: some take any of them, some leave the first out, one is priced too low to deploy,
    one is a Verda cluster. Each ends by its limit (in demo mode's minute-long billing hours,
    within minutes), and all of them together cost less than the demo credit."""
    providers = [spec.provider for spec in simulated_specs()]
    first, rest = providers[0], providers[1:] or providers
    clusters = [  # those that make a cluster of 2 nodes of 8x H200 (Verda)
        spec.provider
        for spec in simulated_specs()
        if spec.cluster_refusal("H200", 8, 2, None) is None
    ]
    return [
        {"name": "demo: 8x B300 anywhere", "gpu_model": "B300", "gpu_count": 8,
         "providers": providers, "max_price_per_hour": "48.00", "max_runtime_hours": 5},
        {"name": f"demo: 8x H100, not {display_name(first)}", "gpu_model": "H100",
         "gpu_count": 8, "providers": rest, "max_price_per_hour": "21.00",
         "max_runtime_hours": 8},
        {"name": "demo: 1x H200", "gpu_model": "H200", "gpu_count": 1,
         "providers": sorted({first, providers[-1]}, key=providers.index),
         "max_price_per_hour": "3.60", "max_total_usd": "15.00"},
        {"name": "demo: 8x H200 in FIN-01 (max too low)", "gpu_model": "H200", "gpu_count": 8,
         "providers": [first], "regions": ["FIN-01"], "max_price_per_hour": "27.00",
         "max_runtime_hours": 3},
        *([{"name": "demo: Kimi K3 on 2 nodes of 8x H200", "gpu_model": "H200", "gpu_count": 8,
            "nodes": 2, "providers": clusters, "max_price_per_hour": "62.00",
            "min_disk_gb": 2000, "max_runtime_hours": 3}]
          if clusters else []),
    ]  # fmt: skip


# Set in the embedded server's task only: its uvicorn logs through the same "uvicorn.error"
# logger as the main server, so without this every "Started server process" and "Shutting
# down" line of the process would be printed twice.
_IN_EMBEDDED_SERVER = contextvars.ContextVar("in_embedded_server", default=False)


class _EmbeddedLifecycleFilter(logging.Filter):
    """Drops the embedded server's own informational lines; its warnings and errors pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not _IN_EMBEDDED_SERVER.get()


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server inside another one: it must leave the process's signals alone, and
    its start and stop are the main server's to announce."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def serve_quietly(self, sockets: list[socket.socket]) -> None:
        """`serve`, with this task's informational uvicorn lines left out."""
        _IN_EMBEDDED_SERVER.set(True)  # in this task's own copy of the context
        await self.serve(sockets=sockets)


class EmbeddedSimulators:
    """The three simulators served from this process on 127.0.0.1:`port`; with `state_path`,
    their state is kept in that file (every few seconds and at the stop) and read back at the
    start, so a restart carries on with the same machines."""

    def __init__(self, port: int, state_path: Path | None = None) -> None:
        self.port = port
        self.state_path = state_path
        self.server: _EmbeddedServer | None = None
        self.task: asyncio.Task[None] | None = None
        self.keeper: asyncio.Task[None] | None = None
        self.simulators: dict[str, ProviderSimulator] = {}
        self._quiet = _EmbeddedLifecycleFilter()

    async def start(self) -> None:
        """Bind the port (failing clearly if it is taken) and serve."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", self.port))
        except OSError as exc:
            sock.close()
            raise RuntimeError(
                f"demo mode cannot serve the simulators on 127.0.0.1:{self.port} ({exc}); set "
                "AUTOPROVISION_SIM_PORT, or AUTOPROVISION_SIM_EMBEDDED=false and run "
                "`autoprovision sim` yourself"
            ) from exc
        app = create_simulator_app()
        self.simulators = app.state.simulators
        if self.state_path is not None and persist.load(self.simulators, self.state_path):
            log.info("demo simulators: carrying on from %s", self.state_path)
        config = uvicorn.Config(  # log_config=None: leave the main server's logging alone
            app, log_config=None, lifespan="off", access_log=False
        )
        self.server = _EmbeddedServer(config)
        logging.getLogger("uvicorn.error").addFilter(self._quiet)
        self.task = asyncio.create_task(self.server.serve_quietly([sock]), name="simulators")
        while not self.server.started:
            if self.task.done():
                self.task.result()
            await asyncio.sleep(0.01)
        if self.state_path is not None:
            self.keeper = asyncio.create_task(self._keep(), name="simulator state")

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(STATE_SAVE_SECONDS)
            self.save()

    def save(self) -> None:
        """Write the simulators' state to the state file now (if they keep one)."""
        if self.state_path is None:
            return
        try:
            persist.save(self.simulators, self.state_path)
        except OSError as exc:
            log.warning("demo simulators: cannot keep their state in %s: %s", self.state_path, exc)

    async def stop(self) -> None:
        """Stop serving, keeping the state as it is then."""
        if self.keeper is not None:
            self.keeper.cancel()
            await asyncio.gather(self.keeper, return_exceptions=True)
        if self.server is not None and self.task is not None:
            self.server.should_exit = True
            await asyncio.wait({self.task}, timeout=5)
        self.save()
        logging.getLogger("uvicorn.error").removeFilter(self._quiet)


def simulator_state_path(database_url: str) -> Path | None:
    """Where demo mode keeps its simulators' state: beside the SQLite file, as
    `<file>.simulators` (None for an in-memory database or PostgreSQL: they start afresh)."""
    database = make_url(database_url)
    file = database.database if database.drivername.startswith("sqlite") else None
    if not file or file == ":memory:":
        return None
    return Path(f"{file}.simulators")


def demo_api_key(box: SecretBox, account_id: str) -> str:
    """The demo account's API key: derived from the secret key and the account's id, so the
    same database (and secret key) gives the same key at every start. Only its hash is
    stored, as for every account."""
    derived = base64.urlsafe_b64encode(box.derive(DEMO_KEY_PURPOSE, account_id)).decode()
    return ACCOUNT_KEY_PREFIX + derived.rstrip("=")


async def prepare_demo_account(
    session: AsyncSession, *, secret_box: SecretBox, with_orders: bool, max_waiting: int
) -> str:
    """The demo account (made on first use) with credit; returns its API key.

    `with_orders`: each demo order of which no copy is open (waiting, or with a machine) is
    placed (again), so the demo always has orders deploying; none is placed twice. Demo mode
    calls this at every start and every DEMO_KEEP_SECONDS, so a demo left running keeps its
    money and its machines.
    `max_waiting`: the account's limit of waiting orders, which this too stays within.
    """
    account = (
        await session.execute(select(Account).where(Account.name == DEMO_ACCOUNT_NAME))
    ).scalar_one_or_none()
    if account is None:
        account_id = new_id("acct")
        account = Account(
            id=account_id,
            name=DEMO_ACCOUNT_NAME,
            api_key_hash=hash_api_key(demo_api_key(secret_box, account_id)),
        )
        session.add(account)
        await session.flush()
    api_key = demo_api_key(secret_box, account.id)
    # Unchanged unless the secret key changed (or the key was an older, random one).
    account.api_key_hash = hash_api_key(api_key)
    if account.balance - account.held < DEMO_CREDIT / 2:
        await ledger.credit(session, account_id=account.id, amount=DEMO_CREDIT, note="demo credit")
    if with_orders:
        await _place_demo_orders(session, account.id, max_waiting=max_waiting)
    return api_key


# A demo order with a copy in one of these is not placed again: it waits, or its machine runs.
OPEN_STATUSES = (OrderStatus.WAITING, OrderStatus.DEPLOYING, OrderStatus.DEPLOYED,
                 OrderStatus.RUNNING, OrderStatus.TERMINATING)  # fmt: skip


async def _place_demo_orders(session: AsyncSession, account_id: str, *, max_waiting: int) -> None:
    """Place each demo order that has no copy open (waiting, or with a machine), by its name."""
    waiting = set(
        (
            await session.scalars(
                select(Order.name).where(
                    Order.account_id == account_id, Order.status.in_(OPEN_STATUSES)
                )
            )
        ).all()
    )
    simulated = {str(spec.provider) for spec in simulated_specs()}
    for body in demo_orders():
        if body["name"] in waiting:
            continue
        request = OrderCreate.model_validate(body).new_order()
        try:
            await placing.place_order(
                session,
                account_id=account_id,
                request=request,
                enabled=simulated,
                max_waiting=max_waiting,
            )
        except TooManyOrders:
            log.warning("the demo account has %d orders waiting: no more demo orders", max_waiting)
            return


def announce_demo(api_key: str, settings: Settings) -> None:
    """Tell the person at the console how to try the demo, and how to start it over."""
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    url = f"http://{host}:{settings.port}"
    database = make_url(settings.database_url)
    file = database.database if database.drivername.startswith("sqlite") else None
    if file and file != ":memory:":  # the file and its -wal and -shm companions
        start_over = f"stop the service, then `rm {shlex.quote(file)}*`"
    else:
        start_over = "stop the service and give it a new, empty database"
    sys.stdout.write(
        f"\n  Demo mode: providers are simulated on {settings.sim_url}.\n"
        f"  Demo account API key: {api_key}\n"
        f"  Open {url}/ and sign in with it to watch the demo orders deploy.\n"
        f"  Or: curl -s {url}/v1/orders -H 'Authorization: Bearer {api_key}'\n"
        "  The key is the same at every start on this database. To start the demo over: "
        f"{start_over}.\n\n"
    )
    sys.stdout.flush()


def _takes(order: dict[str, Any], provider: str, entry: dict[str, Any]) -> int:
    """How many of this simulator catalogue entry an order would take (fees aside): 1, or a
    cluster's node count of a single machine its provider puts together; 0 if none."""
    nodes, wanted = entry.get("nodes", 1), order.get("nodes") or 1
    per_node = entry.get("gpus_per_node", entry["gpu_count"])
    price = Decimal(entry["price_per_hour"]) * (wanted if nodes == 1 else 1)
    fits = (
        provider in order["providers"]
        and (entry["gpu_model"], per_node) == (order["gpu_model"], order["gpu_count"])
        and nodes in (1, wanted)
        and entry["region"] in (order.get("regions") or [entry["region"]])
        and price <= Decimal(order["max_price_per_hour"])
    )
    return (wanted if nodes == 1 else 1) if fits else 0


class StockFeed:
    """Makes stock come and go on the simulators, so demo orders have something to catch."""

    def __init__(
        self,
        sim_url: str,
        *,
        verify: ssl.SSLContext | bool = True,
        gap_seconds: tuple[float, float] = (3, 8),
        shown_seconds: tuple[float, float] = (4, 12),
        seed: int | None = None,
        hour_seconds: float | None = None,
        wanted: Callable[[], Awaitable[list[dict[str, Any]]]] | None = None,
    ) -> None:
        self.sim_url = sim_url
        self.wanted = wanted  # the shapes orders wait for now, beside the demo orders
        self.hour_seconds = hour_seconds
        self.verify = verify
        self.gap_seconds = gap_seconds
        self.shown_seconds = shown_seconds
        self.random = random.Random(seed)

    async def run(self) -> None:
        """Until cancelled: every few seconds, one machine appears for a few seconds.

        Seven times in ten it is a machine an order waiting now would take (before fees):
        each such order as likely as the next, so one placed among many deploys as soon
        (`wanted`, or the demo orders without it), and as many machines as a cluster's nodes.
        The rest of the time it is any machine.
        """
        async with SimControl(base_url=self.sim_url, timeout=5, verify=self.verify) as sim:
            if self.hour_seconds is not None:  # the simulators bill on the service's hours
                for provider in sim.providers():
                    try:
                        await sim.config(provider, hour_seconds=self.hour_seconds)
                    except httpx.HTTPError as exc:
                        log.info("demo stock feed: %s bills real hours: %s", provider, exc)
            region, model, planned = DEMO_FORECAST
            for provider in sim.providers():  # the one whose simulator takes forecasts
                try:
                    await sim.forecast(provider, region, model, **planned)
                except httpx.HTTPError as exc:
                    log.debug("demo stock feed: no forecast at %s: %s", provider, exc)
            while True:
                await asyncio.sleep(self.random.uniform(*self.gap_seconds))
                try:
                    orders = await self.wanted() if self.wanted else demo_orders()
                    await self._one_appearance(sim, orders)
                except httpx.HTTPError as exc:
                    log.info("demo stock feed: %s", exc)

    async def _one_appearance(self, sim: SimControl, orders: list[dict[str, Any]]) -> None:
        catalogs = {p: await sim.catalog(p) for p in sim.providers()}  # Verda's clusters too
        offers = [(p, e) for p, catalog in catalogs.items() for e in catalog]
        takers = [
            taken
            for order in orders
            if (taken := [(p, e, n) for p, e in offers if (n := _takes(order, p, e))])
        ]
        if takers and self.random.random() < 0.7:
            provider, entry, count = self.random.choice(self.random.choice(takers))
        else:
            (provider, entry), count = self.random.choice(offers), 1
        await sim.stock(provider, entry["sku"], entry["region"], count)
        await asyncio.sleep(self.random.uniform(*self.shown_seconds))
        await sim.stock(provider, entry["sku"], entry["region"], 0)
