"""The client against the real service with its watcher and the provider simulators: the
golden path (`orders place ... --json`, then `watch ORDER --until running` exits 0 with the
IP), a watched order cancelled meanwhile, and offers with the orders they satisfy."""

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.client.api import KEY_ENV, URL_ENV
from app.main import create_app
from app.simulators.control import SimControlSync
from tests.client.cli import Account, Autoprovision, Background, create_account
from tests.fixtures.settings import live_settings
from tests.servers import serve_in_thread
from tests.waiting import eventually_sync

# Slow: the service runs in a process of its own.
pytestmark = pytest.mark.slow

# $2.40672/h (its public IP included), $2.63 with the test fees
HYPER_H100 = ("hyperstack", "n3-H100x1", "CANADA-1")
H100 = ("-g", "h100", "-n", "1", "-p", "hyperstack", "--max-price", "3.00")


class Answered:
    """In front of the service: the requests it has answered, as `METHOD /path`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.requests: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
        if scope["type"] == "http":
            self.requests.append(f"{scope['method']} {scope['path']}")


class DropFirstStream:
    """In front of the service: the first event stream ends right after its first event, as
    when a network drops it; later streams pass. Records each stream's Last-Event-ID."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.resumed_after: list[str | None] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/events/stream":
            await self.app(scope, receive, send)
            return
        last = dict(scope["headers"]).get(b"last-event-id")
        self.resumed_after.append(last.decode() if last else None)
        if len(self.resumed_after) > 1:
            await self.app(scope, receive, send)
            return
        ended = False

        async def until_the_first_event(message: Message) -> None:
            nonlocal ended
            if ended:
                raise OSError("the test dropped this stream")
            await send(message)
            if message["type"] == "http.response.body" and b"\nid: " in b"\n" + message["body"]:
                ended = True
                await send({"type": "http.response.body", "body": b"", "more_body": False})

        with contextlib.suppress(OSError):
            await self.app(scope, receive, until_the_first_event)


@dataclass
class Service:
    """The running service: its URL, and what it has answered."""

    url: str
    front: Answered

    def watching(self, order_id: str) -> None:
        """Wait until a `watch` of the order has its stream open and the order read: from
        then on, whatever happens to the order reaches it as an event."""
        read = f"GET /v1/orders/{order_id}"
        eventually_sync(lambda: read in self.front.requests, seconds=10)


@pytest.fixture
def live(database_url: str, sim_url: str, sim_sync: SimControlSync) -> Iterator[Service]:
    """The service with its watcher, against the simulators, on this test's database."""
    front = Answered(create_app(live_settings(database_url, sim_url)))
    with serve_in_thread(front, lifespan="on") as url:
        yield Service(url, front)


def signed_in(live: Service, monkeypatch: pytest.MonkeyPatch, credit: str = "100") -> Account:
    """A new account whose URL and key the commands find in the environment."""
    account = create_account(live.url, credit=credit)
    monkeypatch.setenv(URL_ENV, live.url)
    monkeypatch.setenv(KEY_ENV, account.key)
    return account


def test_place_then_watch_until_running_prints_the_ip(
    autoprovision: Autoprovision,
    live: Service,
    sim_sync: SimControlSync,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    account = signed_in(live, monkeypatch)
    placed = autoprovision("orders", "place", *H100, "--json")
    assert placed.code == 0, placed.err
    order_id = placed.json()["id"]
    watching = Background(autoprovision, "watch", order_id, "--until", "running")
    live.watching(order_id)
    sim_sync.stock(*HYPER_H100, 1)
    ran = watching.result(seconds=30)
    assert ran.code == 0, ran.err
    order = httpx.get(f"{live.url}/v1/orders/{order_id}", headers=account.headers).json()
    ip = order["deployment"]["ip"]
    assert order["status"] == "running" and ip
    assert ran.lines()[-1] == (
        f"{order_id} is running at {ip} (hyperstack CANADA-1 n3-H100x1 at $2.63/h)"
    )
    assert ran.lines()[0].startswith(f"{order_id} is waiting (placed ")  # where it stands
    types = [line.split("  ")[2] for line in ran.lines()[1:-1]]
    assert "order.deploying" in types and types[-2:] == ["order.deployed", "order.running"]
    assert f"Running at {ip};" in ran.lines()[-2]


def test_watch_json_ends_with_the_running_order(
    autoprovision: Autoprovision,
    live: Service,
    sim_sync: SimControlSync,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    signed_in(live, monkeypatch)
    order_id = autoprovision("orders", "place", *H100, "--json").json()["id"]
    sim_sync.stock(*HYPER_H100, 1)  # it may run before the watch starts: the read then says so
    ran = autoprovision("watch", order_id, "--until", "running", "--json", "--timeout", "30")
    assert ran.code == 0, ran.err
    *events, order = [json.loads(line) for line in ran.lines()]
    assert order["id"] == order_id and order["status"] == "running"
    assert order["deployment"]["ip"]
    assert all(e["order_id"] == order_id and e["type"].startswith("order.") for e in events)


def test_a_watched_order_cancelled_meanwhile_is_exit_1(
    autoprovision: Autoprovision, live: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = signed_in(live, monkeypatch)
    order_id = autoprovision("orders", "place", *H100, "--json").json()["id"]
    watching = Background(autoprovision, "watch", order_id, "--until", "running")
    live.watching(order_id)
    cancelled = httpx.post(f"{live.url}/v1/orders/{order_id}/cancel", headers=account.headers)
    assert cancelled.status_code == 200
    ran = watching.result(seconds=30)
    assert ran.code == 1
    assert "order.cancelled  Cancelled by you." in ran.out
    assert ran.err == f"autoprovision: {order_id} is cancelled; it will not get to running\n"


def test_offers_show_the_price_with_fees_and_the_orders_they_satisfy(
    autoprovision: Autoprovision,
    live: Service,
    sim_sync: SimControlSync,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    signed_in(live, monkeypatch, credit="1")  # one hour is $2.63: the order stays waiting
    order_id = autoprovision("orders", "place", *H100, "--json").json()["id"]
    sim_sync.stock(*HYPER_H100, 2)

    def offered() -> list[dict[str, object]] | None:
        ran = autoprovision("offers", "-g", "h100", "--json")
        assert ran.code == 0, ran.err
        return [o for o in ran.json()["data"] if o["sku"] == "n3-H100x1"] or None

    (offer,) = eventually_sync(offered, seconds=15)
    assert offer["price_per_hour_with_fees"] == "2.63" and offer["matching_orders"] == [order_id]
    ran = autoprovision("offers", "-g", "h100")
    (row,) = [line for line in ran.lines() if "n3-H100x1" in line]
    assert row.split()[:6] == ["hyperstack", "CANADA-1", "n3-H100x1", "1x", "H100", "pcie"]
    assert "$2.63" in row and order_id in row
    assert any(line.startswith("hyperstack: read 20") for line in ran.lines())


def test_a_dropped_stream_is_resumed_after_its_last_event(
    autoprovision: Autoprovision,
    database_url: str,
    sim_url: str,
    sim_sync: SimControlSync,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dropping = DropFirstStream(create_app(live_settings(database_url, sim_url)))
    front = Answered(dropping)
    with serve_in_thread(front, lifespan="on") as url:
        live = Service(url, front)
        key = signed_in(live, monkeypatch).key
        order_id = autoprovision("orders", "place", *H100, "--json").json()["id"]
        watching = Background(autoprovision, "watch", order_id, "--until", "running", "--json")
        live.watching(order_id)
        sim_sync.stock(*HYPER_H100, 1)
        ran = watching.result(seconds=30)
        assert ran.code == 0, ran.err
        *events, order = [json.loads(line) for line in ran.lines()]
        page = httpx.get(f"{url}/v1/events", headers={"Authorization": f"Bearer {key}"}).json()
    first, resumed = dropping.resumed_after  # the first stream, and one resume after it
    assert first is None and resumed is not None
    # The stream was cut after its first event (the order's, or the account's top-up, which
    # the watch of one order does not print); from it on, each of the order's events once
    published = [e["id"] for e in page["data"]]
    ids = [event["id"] for event in events]
    assert int(resumed) in published and len(ids) >= 3
    assert ids == [
        e["id"] for e in page["data"] if e["order_id"] == order_id and e["id"] >= int(resumed)
    ]
    types = [event["type"] for event in events]
    assert "order.deploying" in types and types[-2:] == ["order.deployed", "order.running"]
    assert order["status"] == "running" and order["deployment"]["ip"]


VERDA_16H200 = ("verda", "16H200", "FIN-01")  # a cluster of 2 nodes of 8x H200: $54.24/h
H200_CLUSTER = ("-g", "h200", "-n", "8", "-p", "verda", "--max-price", "70", "--nodes", "2")


def test_a_cluster_runs_and_shows_its_login_node_and_machines(
    autoprovision: Autoprovision,
    live: Service,
    sim_sync: SimControlSync,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    account = signed_in(live, monkeypatch, credit="200")
    placed = autoprovision("orders", "place", *H200_CLUSTER, "--json")
    assert placed.code == 0, placed.err
    order_id = placed.json()["id"]
    watching = Background(autoprovision, "watch", order_id, "--until", "running")
    live.watching(order_id)
    sim_sync.stock(*VERDA_16H200, 1)
    ran = watching.result(seconds=30)
    assert ran.code == 0, ran.err
    order = httpx.get(f"{live.url}/v1/orders/{order_id}", headers=account.headers).json()
    login, price = order["login_ip"], order["deployment"]["price_per_hour_with_fees"]
    assert order["status"] == "running" and login and len(order["machines"]) == 2
    assert ran.lines()[-1] == (
        f"{order_id} is running, its login node at {login} "
        f"(verda FIN-01 16H200 (2 nodes) at ${price}/h)"
    )
    assert all(line.endswith("[cluster: 2 x 8x H200]") for line in ran.lines()[1:-1])

    got = autoprovision("orders", "get", order_id)
    assert got.code == 0, got.err
    assert f"verda FIN-01 16H200 (2 nodes) at ${price}/h, login IP {login}" in got.out
    (login_line,) = [line for line in got.lines() if line.startswith("Login IP")]
    assert login_line.split() == ["Login", "IP", login]
    for machine in order["machines"]:  # one line each: provider VM id, IP, state
        (line,) = [line for line in got.lines() if machine["provider_vm_id"] in line]
        assert line.split()[-3:] == [machine["provider_vm_id"], machine["ip"], "running"]


def test_offers_show_a_clusters_nodes_and_fabric(
    autoprovision: Autoprovision,
    live: Service,
    sim_sync: SimControlSync,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    signed_in(live, monkeypatch, credit="1")  # the orders stay waiting: stock is read for them
    cluster_id = autoprovision("orders", "place", *H200_CLUSTER, "--json").json()["id"]
    single_id = autoprovision("orders", "place", *H100, "--json").json()["id"]
    sim_sync.stock(*VERDA_16H200, 1)
    sim_sync.stock(*HYPER_H100, 1)

    def offered() -> list[str] | None:
        ran = autoprovision("offers")
        rows = [line for line in ran.lines() if "16H200" in line or "n3-H100x1" in line]
        return rows if len(rows) == 2 else None

    rows = eventually_sync(offered, seconds=15)
    (cluster,) = [row for row in rows if "16H200" in row]
    assert cluster.split()[:7] == ["verda", "FIN-01", "16H200", "2", "x", "8x", "H200"]
    assert "sxm+infiniband" in cluster and cluster_id in cluster and single_id not in cluster
    (single,) = [row for row in rows if "n3-H100x1" in row]  # control: a single machine
    assert single.split()[3:6] == ["1x", "H100", "pcie"] and single_id in single
    clusters_only = autoprovision("offers", "--nodes", "2").lines()
    assert any("16H200" in line for line in clusters_only)
    assert not any("n3-H100x1" in line for line in clusters_only)
