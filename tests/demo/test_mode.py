"""Demo mode: simulators in-process, a demo account with credit, demo orders, a stock feed."""

import asyncio
import logging
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.background import ConfigurationError
from app.core.states import OrderStatus
from app.demo.mode import (
    DEMO_CREDIT,
    EmbeddedSimulators,
    StockFeed,
    demo_api_key,
    demo_orders,
    prepare_demo_account,
)
from app.main import create_app
from app.providers.registry import simulated_specs
from app.services import ledger
from app.settings import Settings
from app.simulators.app import create_simulator_app
from app.simulators.control import SimControl
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Account, Order
from app.support.secrets import SecretBox
from tests.factories import force_order_status
from tests.fixtures.settings import ADMIN_KEY, SECRET_KEY
from tests.servers import free_port, serve_in_thread
from tests.waiting import eventually, started

DEMO_KEY = re.compile(r"Demo account API key: (\S+)")


def demo_settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "admin_api_key": ADMIN_KEY,
        "mode": "demo",
        "sim_port": free_port(),
        "demo_feed": True,
        "secret_key": SECRET_KEY,
        **overrides,
    }
    return Settings(_env_file=None, **values)


async def test_demo_mode_starts_the_simulators_a_funded_account_and_demo_orders(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = demo_settings(database_url)
    app = create_app(settings)
    async with started(app):
        key = DEMO_KEY.search(capsys.readouterr().out)
        assert key, "the demo key is printed"
        headers = {"Authorization": f"Bearer {key.group(1)}"}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            account = (await client.get("/v1/account", headers=headers)).json()
            assert account["name"] == "demo" and account["balance"] == "1000.00"
            placed = (await client.get("/v1/orders", headers=headers)).json()["data"]
            assert sorted(o["name"] for o in placed) == sorted(o["name"] for o in demo_orders())
        async with SimControl(base_url=f"http://127.0.0.1:{settings.sim_port}") as sim:
            for provider in sim.providers():
                assert await sim.catalog(provider)


async def test_a_restart_on_the_same_database_keeps_the_demo_key(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    keys, listed = [], []
    for _ in range(2):
        app = create_app(demo_settings(database_url))
        async with started(app):
            match = DEMO_KEY.search(capsys.readouterr().out)
            assert match, "the demo key is printed at every start"
            keys.append(match.group(1))
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                # The key printed at the first start works after the restart.
                headers = {"Authorization": f"Bearer {keys[0]}"}
                listed = (await client.get("/v1/orders", headers=headers)).json()["data"]
                wrong = {"Authorization": f"Bearer {keys[0][:-4]}xxxx"}
                assert (await client.get("/v1/orders", headers=wrong)).status_code == 401
    assert keys[0] == keys[1]
    assert keys[0].startswith("ap_live_") and len(keys[0]) == len("ap_live_") + 43
    # One set of demo orders: those still waiting are not placed again.
    assert sorted(o["name"] for o in listed) == sorted(o["name"] for o in demo_orders())


async def test_a_restart_places_again_the_demo_orders_no_longer_waiting(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    app = create_app(demo_settings(database_url))
    async with started(app):
        key = DEMO_KEY.search(capsys.readouterr().out)
        assert key
        headers = {"Authorization": f"Bearer {key.group(1)}"}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            placed = (await client.get("/v1/orders", headers=headers)).json()["data"]
            ended = [o for o in placed if "max too low" not in o["name"]]
            for order in ended:  # as if they had deployed and ended; one is left waiting
                answer = await client.post(f"/v1/orders/{order['id']}/cancel", headers=headers)
                assert answer.status_code == 200, answer.text
    first_ids = {o["id"] for o in placed}
    app = create_app(demo_settings(database_url))
    async with started(app):
        assert DEMO_KEY.search(capsys.readouterr().out)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            listed = (await client.get("/v1/orders", headers=headers)).json()["data"]
    new = [o for o in listed if o["id"] not in first_ids]
    assert sorted(o["name"] for o in new) == sorted(o["name"] for o in ended)
    assert len(ended) == len(demo_orders()) - 1  # control: the waiting one is not placed twice


async def test_live_mode_without_credentials_refuses_to_start(database_url: str) -> None:
    app = create_app(Settings(_env_file=None, database_url=database_url, mode="live"))
    with pytest.raises(ConfigurationError, match="credentials"):
        async with started(app):
            pass


async def test_the_stock_feed_makes_stock_come_and_go() -> None:
    with serve_in_thread(create_simulator_app()) as url:
        feed = StockFeed(url, gap_seconds=(0.05, 0.1), shown_seconds=(0.3, 0.4), seed=7)
        task = asyncio.create_task(feed.run())
        try:
            async with SimControl(base_url=url) as sim:

                async def stocked() -> int:
                    total = 0
                    for provider in sim.providers():
                        catalog = await sim.catalog(provider)
                        total += sum(entry["stock"] for entry in catalog)
                    return total

                assert await eventually(stocked, seconds=5) >= 1

                async def gone() -> bool:
                    return await stocked() == 0

                assert await eventually(gone, seconds=5)
        finally:
            task.cancel()


async def test_the_feed_puts_up_what_waiting_orders_want_a_cluster_all_its_nodes() -> None:
    pair = {"gpu_model": "H100", "gpu_count": 1, "nodes": 2, "providers": ["hyperstack"],
            "regions": None, "max_price_per_hour": Decimal("6.00")}  # fmt: skip

    async def wanted() -> list[dict[str, Any]]:
        return [pair]

    seen: dict[tuple[str, str], int] = {}
    with serve_in_thread(create_simulator_app()) as url:
        feed = StockFeed(
            url, gap_seconds=(0.01, 0.02), shown_seconds=(0.05, 0.1), seed=3, wanted=wanted
        )
        task = asyncio.create_task(feed.run())
        try:
            async with SimControl(base_url=url) as sim:

                async def pair_shown() -> bool:
                    for entry in await sim.catalog("hyperstack"):
                        key = (entry["sku"], entry["region"])
                        seen[key] = max(seen.get(key, 0), entry["stock"])
                    return seen.get(("n3-H100x1", "CANADA-1"), 0) == 2

                # The one Hyperstack shape no demo order wants, two at once: a pair can deploy.
                assert await eventually(pair_shown, seconds=20, interval=0.01)
        finally:
            task.cancel()
    assert max(seen.values()) == 2


@pytest.mark.slow  # the demo feed on the real clock
async def test_demo_mode_records_the_stock_feed_in_the_history(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = demo_settings(database_url)
    assert settings.history_poll_seconds == 5  # demo's default: every simulator is read often
    app = create_app(settings)
    async with started(app):
        key = DEMO_KEY.search(capsys.readouterr().out)
        assert key
        headers = {"Authorization": f"Bearer {key.group(1)}"}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:

            async def recorded() -> dict[str, Any] | None:
                page = (await client.get("/v1/stock/history", headers=headers)).json()
                return page if page["data"] and page["coverage"] else None

            page = await eventually(recorded, seconds=45, interval=0.5)

            async def forecast() -> list[dict[str, Any]] | None:
                summary = await client.get("/v1/stock/summary?gpu_model=B300", headers=headers)
                forecasts: list[dict[str, Any]] = summary.json()["forecasts"]
                return forecasts or None

            (said,) = await eventually(forecast, seconds=45, interval=0.5)
    assert {w["provider"] for w in page["coverage"]} == {s.name for s in simulated_specs()}
    assert not any(i["generated"] for i in page["data"])
    # The demo's Hyperstack says what it plans, so the Stock page has a forecast to show.
    assert (said["provider"], said["within_7_days"], said["within_30_days"]) == (
        "hyperstack",
        "10+",
        "25+",
    )


async def test_the_embedded_simulators_leave_the_server_lines_to_the_main_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="uvicorn.error")
    simulators = EmbeddedSimulators(free_port())
    await simulators.start()
    try:
        async with SimControl(base_url=f"http://127.0.0.1:{simulators.port}") as sim:
            assert await sim.catalog(sim.providers()[0])  # they serve
        # Control: the main server's lines, on the same logger and level, still pass.
        logging.getLogger("uvicorn.error").info("Started server process [%d]", 1)
    finally:
        await simulators.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "uvicorn.error"]
    assert lines == ["Started server process [1]"]
    logging.getLogger("uvicorn.error").info("after the simulators stopped")
    assert caplog.records[-1].getMessage() == "after the simulators stopped"


def test_the_demo_key_comes_from_the_secret_key_and_the_account() -> None:
    box = SecretBox([SECRET_KEY])
    other = Fernet.generate_key().decode()
    key = demo_api_key(box, "acct_one")
    assert demo_api_key(SecretBox([SECRET_KEY]), "acct_one") == key  # control: the same again
    assert demo_api_key(SecretBox([SECRET_KEY, other]), "acct_one") == key  # the first seals
    assert demo_api_key(box, "acct_two") != key  # another database's demo account
    assert demo_api_key(SecretBox([other]), "acct_one") != key  # another secret key
    assert SECRET_KEY.rstrip("=") not in key


async def test_the_demo_orders_stay_within_the_accounts_limit(engine: AsyncEngine) -> None:
    sessionmaker = create_sessionmaker(engine)
    box = SecretBox([SECRET_KEY])

    async def prepare(max_waiting: int) -> int:
        async with session_scope(sessionmaker) as session:
            await prepare_demo_account(
                session, secret_box=box, with_orders=True, max_waiting=max_waiting
            )
        async with session_scope(sessionmaker) as session:
            return len((await session.scalars(select(Order.name))).all())

    assert await prepare(2) == 2  # the start goes on; two are placed
    assert await prepare(100) == len(demo_orders())  # control: the rest, once there is room
    assert await prepare(100) == len(demo_orders())  # and none twice


def test_every_demo_order_ends_by_a_limit_and_all_cost_less_than_the_credit() -> None:
    # Without one, the 8x H100 paid $20.40 a demo minute until the money ran out.
    most = Decimal(0)
    for order in demo_orders():
        price = Decimal(order["max_price_per_hour"])
        costs = [price * Decimal(order.get("max_runtime_hours", "Infinity"))]
        costs.append(Decimal(order.get("max_total_usd", "Infinity")))
        assert min(costs).is_finite(), order["name"]
        most += min(costs)
    assert most < DEMO_CREDIT, most


async def _running_order(client: httpx.AsyncClient, headers: dict[str, str], port: int) -> str:
    """An order of the demo account's running on a QuantaCloud machine; its id."""
    body = {"gpu_model": "H100", "gpu_count": 1, "providers": ["quantacloud"],
            "max_price_per_hour": "4.00", "name": "kept across a restart"}  # fmt: skip
    placed = await client.post("/v1/orders", json=body, headers=headers)
    assert placed.status_code == 201, placed.text
    async with SimControl(base_url=f"http://127.0.0.1:{port}") as sim:
        await sim.stock("quantacloud", "h100-sxm-x1", "us-midwest-4", 1)

    async def runs() -> bool:
        order = (await client.get(f"/v1/orders/{placed.json()['id']}", headers=headers)).json()
        return bool(order["status"] == "running")

    await eventually(runs, 30)
    order_id: str = placed.json()["id"]
    return order_id


@pytest.mark.slow  # the demo on the real clock, twice
@pytest.mark.parametrize("kept", [True, False], ids=["state kept", "control: state removed"])
async def test_a_demo_restart_carries_on_with_the_same_machines_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kept: bool
) -> None:
    database = tmp_path / "demo.db"
    settings = demo_settings(
        f"sqlite+aiosqlite:///{database}", demo_feed=False, running_check_seconds=0.2
    )
    app = create_app(settings)
    async with started(app):
        key = DEMO_KEY.search(capsys.readouterr().out)
        assert key
        headers = {"Authorization": f"Bearer {key.group(1)}"}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            order_id = await _running_order(client, headers, settings.sim_port)
    state = tmp_path / "demo.db.simulators"
    assert state.exists()  # written beside the database
    if not kept:
        state.unlink()
    app = create_app(settings)
    async with started(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:

            async def read_since_the_restart() -> dict[str, Any] | None:
                # The running watch has read the VM again (every 0.2 s here) or found it gone.
                order: dict[str, Any] = (
                    await client.get(f"/v1/orders/{order_id}", headers=headers)
                ).json()
                async with SimControl(base_url=f"http://127.0.0.1:{settings.sim_port}") as sim:
                    reads = [r for r in await sim.requests("quantacloud") if "deploy" in r["path"]]
                return order if reads or order["status"] != "running" else None

            order = await eventually(read_since_the_restart, 30)
            if not kept:  # the control: simulators that forgot it, as before
                order = await eventually(lambda: _status_is(client, headers, order_id, "lost"), 30)
            assert order["status"] == ("running" if kept else "lost")


async def _status_is(
    client: httpx.AsyncClient, headers: dict[str, str], order_id: str, status: str
) -> dict[str, Any] | None:
    order: dict[str, Any] = (await client.get(f"/v1/orders/{order_id}", headers=headers)).json()
    return order if order["status"] == status else None


async def test_keeping_the_demo_places_again_only_the_orders_with_no_copy_open(
    engine: AsyncEngine,
) -> None:
    sessionmaker = create_sessionmaker(engine)
    box = SecretBox([SECRET_KEY])

    async def keep() -> list[Order]:
        async with session_scope(sessionmaker) as session:
            await prepare_demo_account(session, secret_box=box, with_orders=True, max_waiting=100)
        async with session_scope(sessionmaker) as session:
            return list((await session.scalars(select(Order).order_by(Order.id))).all())

    first = await keep()
    running, ended = first[0], first[1]
    await force_order_status(engine, running.id, OrderStatus.RUNNING)
    await force_order_status(engine, ended.id, OrderStatus.TERMINATED)
    async with session_scope(sessionmaker) as session:  # most of the money taken, as creates do
        account = (await session.scalars(select(Account))).one()
        await ledger.place_hold(session, account_id=account.id, amount=Decimal("900"))
    again = await keep()
    new = [o.name for o in again if o.id not in {f.id for f in first}]
    assert new == [ended.name]  # the running one is not placed twice; the ended one is
    async with session_scope(sessionmaker) as session:
        account = (await session.scalars(select(Account))).one()
    assert account.balance - account.held == Decimal("1100.00")  # $100 left, $1,000 added
