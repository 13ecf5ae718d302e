"""Forgetting ended orders: what is pruned once an order has been over for the retention
period, and what the ledger keeps for good.

An ended order that never held money (placed, then cancelled or expired before any create) is
deleted with its timeline and its events. One that did (a create attempt, a hold) keeps its row
and its attempts: its ledger entries name them (every entry naming an order names its hold or
its attempt, by foreign key), and they say which machine, at what price, each hour was paid
for. It loses its timeline, its events and its sealed start-up script, and is marked pruned.
"""

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import OrderStatus
from app.storage.models import (
    Attempt,
    Hold,
    Order,
    OrderEvent,
    PublishedEvent,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEvent,
)

PRUNE_BATCH = 500
ENDED = tuple(s for s in OrderStatus if s.is_final)
# Replicas each run the housekeeping: on PostgreSQL one prunes at a time, the others skip.
_PRUNE_LOCK = 0x61705F7072756E65  # "ap_prune"


@dataclass(frozen=True)
class Pruned:
    """What one batch did: orders deleted, and orders kept for their ledger but pruned."""

    deleted: int = 0
    kept: int = 0

    @property
    def total(self) -> int:
        """Orders the batch pruned."""
        return self.deleted + self.kept


async def prune_ended_orders(
    session: AsyncSession, *, ended_before: datetime, now: datetime, limit: int = PRUNE_BATCH
) -> Pruned:
    """Prune up to `limit` orders that ended before `ended_before`, oldest first."""
    if session.get_bind().dialect.name == "postgresql":
        locked = await session.scalar(select(func.pg_try_advisory_xact_lock(_PRUNE_LOCK)))
        if not locked:
            return Pruned()
    order_ids = list(
        (
            await session.execute(
                select(Order.id)
                .where(
                    Order.pruned_at.is_(None),
                    Order.updated_at < ended_before,
                    Order.status.in_(ENDED),
                )
                .order_by(Order.updated_at)
                .limit(limit)
            )
        ).scalars()
    )
    if not order_ids:
        return Pruned()
    held_money = (
        select(Attempt.order_id)
        .where(Attempt.order_id.in_(order_ids))
        .union(select(Hold.order_id).where(Hold.order_id.in_(order_ids)))
    )
    kept = set((await session.execute(held_money)).scalars())
    await _delete_events(session, order_ids)
    deleted = [order_id for order_id in order_ids if order_id not in kept]
    if deleted:
        await session.execute(
            delete(Order).where(Order.id.in_(deleted)).execution_options(synchronize_session=False)
        )
    if kept:
        await session.execute(
            update(Order)
            .where(Order.id.in_(kept))
            .values(pruned_at=now, startup_script=None)
            .execution_options(synchronize_session=False)
        )
    return Pruned(deleted=len(deleted), kept=len(kept))


async def _delete_events(session: AsyncSession, order_ids: list[str]) -> None:
    """The orders' timelines, their lines on the event stream, and their webhook events with
    every delivery and attempt of them (delivered or not: the order they tell of is gone)."""
    events = select(WebhookEvent.id).where(WebhookEvent.order_id.in_(order_ids))
    deliveries = select(WebhookDelivery.id).where(WebhookDelivery.event_id.in_(events))
    for statement in (
        delete(WebhookAttempt).where(WebhookAttempt.delivery_id.in_(deliveries)),
        delete(WebhookDelivery).where(WebhookDelivery.event_id.in_(events)),
        delete(WebhookEvent).where(WebhookEvent.order_id.in_(order_ids)),
        delete(PublishedEvent).where(PublishedEvent.order_id.in_(order_ids)),
        delete(OrderEvent).where(OrderEvent.order_id.in_(order_ids)),
    ):
        await session.execute(statement.execution_options(synchronize_session=False))
