"""Migrations, schema drift and the SQLite connection settings."""

from decimal import Decimal
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, inspect, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.catalogue import Provider
from app.db import (
    DatabaseInUse,
    alembic_config,
    create_engine,
    create_sessionmaker,
    lock_sqlite_file,
    migrate,
    session_scope,
)
from app.models import Base, Deployment
from app.providers.base import VM, Offer, VMState
from app.services import deployments
from tests.factories import claimed

QUANTA_L40S = Offer(Provider.QUANTACLOUD, "us-east-1", "l40s-x1", "L40S", 1, Decimal("1.10"))
HYPER_L40S = Offer(Provider.HYPERSTACK, "CANADA-1", "n3-L40Sx1", "L40S", 1, Decimal("1.10"))


def _drift(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, Base.metadata))


async def test_migrations_produce_exactly_the_models_schema(empty_database_url: str) -> None:
    engine = create_engine(empty_database_url)
    try:
        await migrate(engine)
        async with engine.connect() as connection:
            drift = await connection.run_sync(_drift)
            tables = await connection.run_sync(lambda c: set(inspect(c).get_table_names()))
    finally:
        await engine.dispose()
    assert drift == []
    assert set(Base.metadata.tables) <= tables


async def test_migrating_twice_changes_nothing(empty_database_url: str) -> None:
    engine = create_engine(empty_database_url)
    try:
        await migrate(engine)
        await migrate(engine)
        async with engine.connect() as connection:
            version = (
                await connection.execute(text("SELECT version_num FROM alembic_version"))
            ).all()
    finally:
        await engine.dispose()
    assert len(version) == 1


async def test_sqlite_runs_in_wal_mode_with_a_busy_timeout(tmp_path: Any) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'wal.db'}")
    try:
        async with engine.connect() as connection:
            journal = (await connection.execute(text("PRAGMA journal_mode"))).scalar_one()
            timeout = (await connection.execute(text("PRAGMA busy_timeout"))).scalar_one()
            foreign_keys = (await connection.execute(text("PRAGMA foreign_keys"))).scalar_one()
    finally:
        await engine.dispose()
    assert journal == "wal"
    assert timeout >= 5000
    assert foreign_keys == 1


def test_a_second_process_on_one_sqlite_file_is_refused(tmp_path: Any) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'one.db'}"
    first = lock_sqlite_file(url)
    assert first is not None
    try:
        with pytest.raises(DatabaseInUse, match="one process only"):
            lock_sqlite_file(url)
    finally:
        first.close()
    again = lock_sqlite_file(url)
    assert again is not None
    again.close()
    assert lock_sqlite_file("postgresql+asyncpg://x@localhost/db") is None


def _alembic(connection: Connection, action: str, revision: str) -> None:
    config = alembic_config(connection.engine.url.render_as_string(hide_password=False))
    config.attributes["connection"] = connection
    getattr(command, action)(config, revision)


async def _to_revision(engine: AsyncEngine, action: str, revision: str) -> None:
    async with engine.connect() as connection:
        await connection.run_sync(_alembic, action, revision)
        await connection.commit()


async def test_the_one_owner_rule_is_not_added_over_a_vm_two_orders_share(
    engine: AsyncEngine,
) -> None:
    first, second = [i.deployment_id for i in await claimed(engine, HYPER_L40S, HYPER_L40S)]
    async with session_scope(create_sessionmaker(engine)) as session:
        for deployment_id, vm_id in ((first, "vm-1"), (second, "vm-2")):
            vm = VM(Provider.HYPERSTACK, vm_id, VMState.PENDING, "BUILD")
            await deployments.settle_created(session, deployment_id=deployment_id, vm=vm)
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
    other_kind = Offer(Provider.QUANTACLOUD, "us-east-1", "h100-sxm-x1", "H100", 1, Decimal(2))
    older, younger = [i.deployment_id for i in await claimed(engine, QUANTA_L40S, other_kind)]
    await _to_revision(engine, "downgrade", "0007")
    async with engine.begin() as connection:  # two open attempts of one kind, as before
        await connection.execute(
            text("UPDATE deployments SET instance_type = 'l40s-x1' WHERE id = :id"), {"id": younger}
        )
    await _to_revision(engine, "upgrade", "head")
    async with session_scope(create_sessionmaker(engine)) as session:
        kinds = {d.id: d.serial_kind for d in (await session.execute(select(Deployment))).scalars()}
    assert kinds == {older: "us-east-1/l40s-x1", younger: None}
