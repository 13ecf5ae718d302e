"""The reads behind the watcher's in-memory book of waiting orders and their accounts' funds."""

from collections.abc import AsyncIterator, Collection, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import OrderStatus
from app.storage.models import Account, Order

# What the matcher needs of an order (see app.core.market.all_wants_of), and its status.
_ORDER_COLUMNS = (
    Order.id,
    Order.status,
    Order.created_at,
    Order.providers,
    Order.gpu_model,
    Order.gpu_count,
    Order.max_price_per_hour,
    Order.regions,
    Order.min_disk_gb,
    Order.interconnect,
    Order.nodes,
    Order.cluster_interconnect,
    Order.startup_script_bytes,
    Order.image,
    Order.serve_engine,
    Order.account_id,
    Order.alternatives,
    Order.prefer,
    Order.max_total_usd,
    Order.updated_at,
)


async def waiting(session: AsyncSession) -> Sequence[Any]:
    """Every waiting order (the matcher's columns)."""
    rows = await session.execute(select(*_ORDER_COLUMNS).where(Order.status == OrderStatus.WAITING))
    return rows.all()


async def waiting_pages(session: AsyncSession, size: int) -> AsyncIterator[Sequence[Any]]:
    """Every waiting order (the matcher's columns), `size` rows at a time."""
    query = select(*_ORDER_COLUMNS).where(Order.status == OrderStatus.WAITING)
    result = await session.stream(query.execution_options(yield_per=size))
    async for page in result.partitions(size):
        yield page


async def waiting_stamps(
    session: AsyncSession, size: int
) -> AsyncIterator[Sequence[tuple[str, datetime]]]:
    """(id, updated_at) of every waiting order, `size` at a time."""
    query = select(Order.id, Order.updated_at).where(Order.status == OrderStatus.WAITING)
    result = await session.stream(query.execution_options(yield_per=size))
    async for page in result.partitions(size):
        yield [(order_id, stamp) for order_id, stamp in page]


async def waiting_by_id(session: AsyncSession, order_ids: Collection[str]) -> Sequence[Any]:
    """These orders, those of them still waiting (the matcher's columns)."""
    query = select(*_ORDER_COLUMNS).where(
        Order.id.in_(order_ids), Order.status == OrderStatus.WAITING
    )
    return (await session.execute(query)).all()


async def changed_since(session: AsyncSession, since: datetime) -> Sequence[Any]:
    """Every order, whatever its status, written at or after `since` (the matcher's columns)."""
    rows = await session.execute(select(*_ORDER_COLUMNS).where(Order.updated_at >= since))
    return rows.all()


async def funds_changed_since(session: AsyncSession, since: datetime) -> dict[str, Decimal]:
    """Account id -> available balance, for the accounts written at or after `since`."""
    rows = await session.execute(
        select(Account.id, Account.balance, Account.held).where(Account.updated_at >= since)
    )
    return {account_id: balance - held for account_id, balance, held in rows}


async def funds_of(session: AsyncSession, account_ids: set[str]) -> dict[str, Decimal]:
    """Account id -> available balance."""
    if not account_ids:
        return {}
    rows = await session.execute(
        select(Account.id, Account.balance, Account.held).where(Account.id.in_(account_ids))
    )
    return {account_id: balance - held for account_id, balance, held in rows}
