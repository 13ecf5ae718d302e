"""Alembic environment: runs on the connection the service hands over, or opens its own."""

import asyncio

from alembic import context
from sqlalchemy import Connection

from app.storage.db import create_engine, foreign_keys_checked_after
from app.storage.models import Base

config = context.config
target_metadata = Base.metadata


def run_on(connection: Connection) -> None:
    """Run the migrations on an open synchronous connection."""
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def run_with_own_engine() -> None:
    """Open an engine from the configured URL, migrate, and close it."""
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
    async with engine.connect() as connection, foreign_keys_checked_after(connection):
        await connection.run_sync(run_on)
        await connection.commit()
    await engine.dispose()


if context.is_offline_mode():
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    existing = config.attributes.get("connection")
    if existing is not None:
        run_on(existing)
    else:
        asyncio.run(run_with_own_engine())
