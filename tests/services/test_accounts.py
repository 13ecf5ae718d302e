"""Accounts and the generated admin key."""

import asyncio

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.services import accounts
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import AdminKey


async def test_replicas_starting_together_generate_one_admin_key(engine: AsyncEngine) -> None:
    maker = create_sessionmaker(engine)

    async def start() -> str | None:
        async with session_scope(maker) as session:
            return await accounts.ensure_admin_key(session)

    generated = [k for k in await asyncio.gather(*(start() for _ in range(4))) if k is not None]
    assert len(generated) == 1
    async with session_scope(maker) as session:
        assert await session.scalar(select(func.count()).select_from(AdminKey)) == 1
        assert await accounts.is_stored_admin_key(session, api_key=generated[0])


async def test_a_reset_admin_key_replaces_the_old_one(engine: AsyncEngine) -> None:
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        old = await accounts.ensure_admin_key(session)
    async with session_scope(maker) as session:
        new = await accounts.reset_admin_key(session)
    async with session_scope(maker) as session:
        assert old is not None and old != new
        assert not await accounts.is_stored_admin_key(session, api_key=old)
        assert await accounts.is_stored_admin_key(session, api_key=new)
