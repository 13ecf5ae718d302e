"""Ended orders are forgotten past the retention period, on both databases: one that never
held money goes with its timeline and events; one the ledger names keeps its row and its
attempt, and loses the rest; the ledger itself is untouched."""

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import InstrumentedAttribute

from app.core.catalogue import Provider
from app.core.clock import utcnow
from app.core.ids import new_id
from app.core.states import TerminateReason
from app.providers.base import VM, Offer, VMState
from app.services import attempts, orders, published_events, retention, terminations
from app.services.webhooks import endpoints
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import (
    Attempt,
    LedgerEntry,
    Order,
    OrderEvent,
    PublishedEvent,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEvent,
)
from app.support.secrets import SecretBox
from tests.factories import claim, waiting_orders
from tests.fixtures.settings import SECRET_KEY

OFFER = Offer(Provider("hyperstack"), "CANADA-1", "n3-H100x1", "H100", 1, Decimal("3.00"))
VM_1 = VM(Provider("hyperstack"), "412001", VMState.RUNNING, "ACTIVE", ip="203.0.113.9")
RETENTION = timedelta(days=90)


@dataclass
class Kept:
    """What an order leaves in the database."""

    order: bool
    attempts: int
    timeline: int
    stream: int
    webhook_events: int
    script: bool


async def _kept(engine: AsyncEngine, order_id: str) -> Kept:
    async def count(column: InstrumentedAttribute[str | None]) -> int:
        return await session.scalar(select(func.count()).where(column == order_id)) or 0

    async with session_scope(create_sessionmaker(engine)) as session:
        order = await session.get(Order, order_id)
        return Kept(
            order=order is not None,
            attempts=await count(Attempt.order_id),
            timeline=await count(OrderEvent.order_id),
            stream=await count(PublishedEvent.order_id),
            webhook_events=await count(WebhookEvent.order_id),
            script=order is not None and order.startup_script is not None,
        )


async def _ledger(engine: AsyncEngine) -> list[tuple[str, Decimal, str | None, str | None]]:
    async with session_scope(create_sessionmaker(engine)) as session:
        rows = await session.execute(
            select(
                LedgerEntry.kind, LedgerEntry.amount, LedgerEntry.order_id, LedgerEntry.attempt_id
            ).order_by(LedgerEntry.id)
        )
        return [tuple(row) for row in rows]  # type: ignore[misc]


async def _ended_ago(engine: AsyncEngine, order_id: str, ago: timedelta) -> None:
    async with session_scope(create_sessionmaker(engine)) as session:
        await session.execute(
            update(Order).where(Order.id == order_id).values(updated_at=utcnow() - ago)
        )


async def _run_a_machine(engine: AsyncEngine, order_id: str) -> None:
    """Claimed, deployed (its first hour paid), terminated and refunded: a ledger's worth."""
    intent = await claim(engine, order_id, OFFER)
    async with session_scope(create_sessionmaker(engine)) as session:
        await attempts.settle_created(session, attempt_id=intent.attempt_id, vm=VM_1)
        await terminations.request(
            session,
            order_id=order_id,
            account_id=None,
            reason=TerminateReason.REQUESTED,
            now=utcnow(),
        )
        await terminations.settle_terminated(session, attempt_id=intent.attempt_id, now=utcnow())


async def _scene(engine: AsyncEngine) -> tuple[str, str, str, str]:
    """Four orders of one account with a webhook endpoint, each with a script, their lines
    published: one cancelled and one that ran a machine, both ended 91 days ago; one
    cancelled 89 days ago; one placed 100 days ago and still waiting."""
    old, ran, recent, waiting = await waiting_orders(engine, OFFER, 4, startup_script="echo hi")
    async with session_scope(create_sessionmaker(engine)) as session:
        account_id = (await session.get(Order, old)).account_id  # type: ignore[union-attr]
        await endpoints.create_endpoint(
            session,
            account_id=account_id,
            url="https://203.0.114.9/h",
            events=None,
            description=None,
            box=SecretBox([SECRET_KEY]),
            allow_private=False,
        )
    await _run_a_machine(engine, ran)
    async with session_scope(create_sessionmaker(engine)) as session:
        for order_id in (old, recent):
            await orders.cancel_order(session, account_id=account_id, order_id=order_id)
        await session.flush()
        for delivery_id in (await session.execute(select(WebhookDelivery.id))).scalars():
            session.add(WebhookAttempt(id=new_id("wha"), delivery_id=delivery_id, duration_ms=5))
        await published_events.publish_pending(session)
    await _ended_ago(engine, old, RETENTION + timedelta(days=1))
    await _ended_ago(engine, ran, RETENTION + timedelta(days=1))
    await _ended_ago(engine, recent, RETENTION - timedelta(days=1))
    await _ended_ago(engine, waiting, RETENTION + timedelta(days=10))
    return old, ran, recent, waiting


async def test_ended_orders_past_the_retention_are_pruned_and_the_ledger_kept(
    engine: AsyncEngine,
) -> None:
    old, ran, recent, waiting = await _scene(engine)
    ledger = await _ledger(engine)
    assert {kind for kind, *_ in ledger} >= {"hold", "debit", "refund"}
    before = {order_id: await _kept(engine, order_id) for order_id in (old, ran, recent, waiting)}
    assert before[old] == Kept(True, 0, 2, 2, 1, True)  # placed, cancelled
    assert before[ran].attempts == 1 and before[ran].webhook_events > 0

    async with session_scope(create_sessionmaker(engine)) as session:
        pruned = await retention.prune_ended_orders(
            session, ended_before=utcnow() - RETENTION, now=utcnow()
        )
    assert pruned == retention.Pruned(deleted=1, kept=1)

    assert await _kept(engine, old) == Kept(False, 0, 0, 0, 0, False)
    assert await _kept(engine, ran) == Kept(True, 1, 0, 0, 0, False)
    assert await _kept(engine, recent) == before[recent]  # ended within the retention
    assert await _kept(engine, waiting) == before[waiting]  # not ended: never pruned
    assert await _ledger(engine) == ledger  # every entry, each naming what it named
    async with session_scope(create_sessionmaker(engine)) as session:
        left = await session.scalar(select(func.count()).select_from(WebhookAttempt))
        assert left  # the recent order's: pruned only with their order
        again = await retention.prune_ended_orders(
            session, ended_before=utcnow() - RETENTION, now=utcnow()
        )
    assert again == retention.Pruned()  # the kept order is not pruned twice
