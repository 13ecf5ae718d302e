"""Migrations that move data: what they keep, and what they refuse to guess."""

from dataclasses import replace
from decimal import Decimal
from typing import Any

import httpx
import pytest
from alembic import command
from sqlalchemy import Connection, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Provider
from app.core.ids import new_id
from app.providers.base import VM, Offer, VMState
from app.services import account_events, attempts, published_events
from app.services.stock import history as stock_history
from app.storage.db import (
    alembic_config,
    create_read_sessionmaker,
    create_sessionmaker,
    foreign_keys_checked_after,
    session_scope,
)
from app.storage.models import Attempt, Order
from tests.factories import account_in_database, claimed, create_account, order_body, place_order
from tests.services.stock.history_rows import apply, closed, days, interval

QUANTA_L40S = Offer(Provider("quantacloud"), "us-east-1", "l40s-x1", "L40S", 1, Decimal("1.10"))
HYPER_L40S = Offer(Provider("hyperstack"), "CANADA-1", "n3-L40Sx1", "L40S", 1, Decimal("1.10"))


def _alembic(connection: Connection, action: str, revision: str) -> None:
    config = alembic_config(connection.engine.url.render_as_string(hide_password=False))
    config.attributes["connection"] = connection
    getattr(command, action)(config, revision)


async def _to_revision(engine: AsyncEngine, action: str, revision: str) -> None:
    async with engine.connect() as connection, foreign_keys_checked_after(connection):
        await connection.run_sync(_alembic, action, revision)
        await connection.commit()


async def test_the_one_owner_rule_is_not_added_over_a_vm_two_orders_share(
    engine: AsyncEngine,
) -> None:
    first, second = [i.attempt_id for i in await claimed(engine, HYPER_L40S, HYPER_L40S)]
    async with session_scope(create_sessionmaker(engine)) as session:
        for attempt_id, vm_id in ((first, "vm-1"), (second, "vm-2")):
            vm = VM(Provider("hyperstack"), vm_id, VMState.PENDING, "BUILD")
            await attempts.settle_created(session, attempt_id=attempt_id, vm=vm)
    await _to_revision(engine, "downgrade", "0007")
    async with engine.begin() as connection:  # what the bug this revision fixes left behind
        await connection.execute(
            text("UPDATE deployments SET provider_vm_id = 'vm-1' WHERE id = :id"), {"id": second}
        )
    with pytest.raises(RuntimeError, match="hyperstack VM vm-1 \\(2 attempts\\)"):
        await _to_revision(engine, "upgrade", "head")
    async with engine.begin() as connection:  # positive control: once mended, it migrates
        await connection.execute(
            text("UPDATE deployments SET status = 'failed' WHERE id = :id"), {"id": second}
        )
    await _to_revision(engine, "upgrade", "head")


async def test_attempts_left_open_of_one_unnamed_kind_migrate_with_the_oldest_serialized(
    engine: AsyncEngine,
) -> None:
    other_kind = Offer(Provider("quantacloud"), "us-east-1", "h100-sxm-x1", "H100", 1, Decimal(2))
    older, younger = [i.attempt_id for i in await claimed(engine, QUANTA_L40S, other_kind)]
    await _to_revision(engine, "downgrade", "0007")
    async with engine.begin() as connection:  # two open attempts of one kind, as before
        await connection.execute(
            text("UPDATE deployments SET instance_type = 'l40s-x1' WHERE id = :id"), {"id": younger}
        )
    await _to_revision(engine, "upgrade", "head")
    async with session_scope(create_sessionmaker(engine)) as session:
        kinds = {d.id: d.serial_kind for d in (await session.execute(select(Attempt))).scalars()}
    assert kinds == {older: "us-east-1/l40s-x1", younger: None}


async def test_closed_stock_history_fills_its_days_as_the_recorder_would(
    engine: AsyncEngine,
) -> None:
    over_midnight = closed(10 * 3600, 14 * 3600)  # T0 is noon
    price_change = replace(closed(20 * 3600, 21 * 3600, price="2.99"), region="FIN-02")
    still_open = replace(interval(0), id=new_id("stk"), region="FIN-03")
    await apply(engine, over_midnight, price_change, still_open)
    made = replace(closed(0, 60), id=new_id("stk"), region="FIN-04")
    async with session_scope(create_sessionmaker(engine)) as session:
        await stock_history.insert_generated(session, [made], [])
    recorded = await days(engine)
    assert len(recorded) == 4  # two days, one, and the generated one; none for the open one

    await _to_revision(engine, "downgrade", "0011")
    await _to_revision(engine, "upgrade", "head")
    assert await days(engine) == recorded


async def test_stock_history_before_nodes_is_of_single_machines_and_keeps_one_open_per_key(
    engine: AsyncEngine,
) -> None:
    await apply(engine, closed(0, 60), interval(120))  # one key: closed, then open again
    await _to_revision(engine, "downgrade", "0017")  # the columns go, the table is rebuilt
    await _to_revision(engine, "upgrade", "head")
    async with engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT nodes, cluster_interconnect FROM stock_intervals")
        )
        assert rows.all() == [(1, None), (1, None)]
        day_rows = await connection.execute(
            text("SELECT nodes, cluster_interconnect FROM stock_days")
        )
        assert day_rows.all() == [(1, None)]
    with pytest.raises(IntegrityError):  # still one open interval per key
        await apply(engine, interval(180))
    await apply(engine, closed(200, 260))  # control: a closed one of the key is taken


async def test_events_published_before_are_numbered_per_account_in_their_order(
    engine: AsyncEngine,
) -> None:
    async def credit_and_publish(account_id: str) -> int:
        async with session_scope(create_sessionmaker(engine)) as session:
            account_events.add(session, account_id=account_id, kind="credited", message="$1.")
        async with session_scope(create_sessionmaker(engine)) as session:
            return await published_events.publish_pending(session)

    ada, bob = await account_in_database(engine), await account_in_database(engine)
    for account_id in (ada, bob, ada, ada, bob):
        assert await credit_and_publish(account_id) == 1
    await _to_revision(engine, "downgrade", "0028")
    await _to_revision(engine, "upgrade", "head")
    assert await credit_and_publish(bob) == 1  # the count carries on after them
    async with create_read_sessionmaker(engine)() as session:
        ids = {
            account_id: [
                e.id
                for e in await published_events.after(
                    session, account_id=account_id, after_id=0, limit=10
                )
            ]
            for account_id in (ada, bob)
        }
    assert ids == {ada: [1, 2, 3], bob: [1, 2, 3]}


async def test_orders_of_one_machine_list_it_as_their_one_alternative(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    account = await create_account(client)
    one = await place_order(client, account, regions=["FIN-01"], min_disk_gb=500)
    listed = {"alternatives": [order_body(), order_body(gpu_model="H200", max_price_per_hour="60")]}
    placed_two = await client.post("/v1/orders", json=listed, headers=account.headers)
    assert placed_two.status_code == 201, placed_two.text
    two = placed_two.json()

    async def stored() -> dict[str, Any]:
        async with create_read_sessionmaker(engine)() as session:
            rows = await session.execute(select(Order.id, Order.alternatives))
            return dict(rows.all())

    placed = await stored()
    assert len(placed[one["id"]]) == 1 and len(placed[two["id"]]) == 2
    await _to_revision(engine, "downgrade", "0029")
    async with engine.connect() as connection:  # the control: as orders were before
        nulls = await connection.scalar(
            text("SELECT COUNT(*) FROM orders WHERE alternatives IS NULL")
        )
    assert nulls == 1
    await _to_revision(engine, "upgrade", "head")
    assert await stored() == placed
    shown = await client.get(f"/v1/orders/{one['id']}", headers=account.headers)
    assert shown.json()["alternatives"] == one["alternatives"]
