"""The state tables: complete, checked by the services, held by the database, shown in the docs."""

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.ids import new_id
from app.core.states import (
    ATTEMPT_TRANSITIONS,
    ORDER_TRANSITIONS,
    AttemptStatus,
    IllegalTransition,
    OrderStatus,
    check_attempt_move,
    check_order_move,
    mermaid,
)
from app.services import attempts
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Order, WebhookDelivery, WebhookEndpoint, WebhookEvent
from tests.factories import HYPER_L40S, claimed, waiting_orders

ROOT = Path(__file__).resolve().parents[2]
STATES_PAGE = ROOT / "docs" / "reference" / "states.md"
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"


def test_every_state_has_a_row_and_moves_only_to_known_states() -> None:
    assert set(ORDER_TRANSITIONS) == set(OrderStatus)
    assert set(ATTEMPT_TRANSITIONS) == set(AttemptStatus)
    reasons = [r for moves in ORDER_TRANSITIONS.values() for r in moves.values()]
    reasons += [r for moves in ATTEMPT_TRANSITIONS.values() for r in moves.values()]
    for reason in reasons:
        assert reason and ":" not in reason and ";" not in reason  # Mermaid labels


def test_status_groups_follow_from_the_tables() -> None:
    assert {s for s in OrderStatus if s.is_final} == {
        OrderStatus.CANCELLED, OrderStatus.EXPIRED, OrderStatus.FAILED, OrderStatus.TERMINATED,
        OrderStatus.LOST,
    }  # fmt: skip
    assert {s for s in OrderStatus if s.can_terminate} == {
        OrderStatus.DEPLOYING, OrderStatus.DEPLOYED, OrderStatus.RUNNING
    }  # fmt: skip
    assert {s for s in AttemptStatus if s.is_open} == {
        AttemptStatus.CREATING, AttemptStatus.UNKNOWN
    }  # fmt: skip
    assert {s for s in AttemptStatus if s.owns_vm} == {
        AttemptStatus.DEPLOYED, AttemptStatus.RUNNING, AttemptStatus.TERMINATING
    }  # fmt: skip
    # A VM stays its attempt's until the provider shows it gone: only then may it end.
    for status in AttemptStatus:
        if status.is_ended:
            assert all(before.owns_vm for before, moves in ATTEMPT_TRANSITIONS.items()
                       if status in moves)  # fmt: skip
    for status in AttemptStatus:  # only an open attempt can still come to own a VM
        if not status.is_open and not status.owns_vm:
            assert AttemptStatus.DEPLOYED not in ATTEMPT_TRANSITIONS[status]


def test_a_move_the_table_does_not_allow_raises() -> None:
    check_order_move(OrderStatus.WAITING, OrderStatus.DEPLOYING)  # allowed: no error
    with pytest.raises(IllegalTransition, match="from running to waiting"):
        check_order_move(OrderStatus.RUNNING, OrderStatus.WAITING)
    with pytest.raises(IllegalTransition, match="from not_created to deployed"):
        check_attempt_move((AttemptStatus.UNKNOWN, AttemptStatus.NOT_CREATED),
                              AttemptStatus.DEPLOYED)  # fmt: skip


async def test_an_illegal_move_is_never_written(engine: AsyncEngine) -> None:
    (order_id,) = await waiting_orders(engine, HYPER_L40S)
    maker = create_sessionmaker(engine)
    with pytest.raises(IllegalTransition):
        async with session_scope(maker) as session:
            await attempts.move_order(
                session, order_id, expected=OrderStatus.WAITING, status=OrderStatus.RUNNING
            )
    async with session_scope(maker) as session:
        order = await session.get(Order, order_id)
        assert order is not None and order.status is OrderStatus.WAITING
        # Positive control: the same function makes a move the table allows.
        assert await attempts.move_order(
            session, order_id, expected=OrderStatus.WAITING, status=OrderStatus.CANCELLED
        )


async def test_the_database_refuses_a_status_it_does_not_know(engine: AsyncEngine) -> None:
    (intent,) = await claimed(engine, HYPER_L40S)  # an order, its attempt, hold and events
    await _a_webhook_delivery(engine, intent.order_id)
    for table, column, value in [
        ("orders", "status", "paused"),
        ("deployments", "status", "paused"),
        ("order_events", "kind", "paused"),
        ("holds", "status", "paused"),
        ("webhook_deliveries", "status", "paused"),
    ]:
        with pytest.raises(IntegrityError):
            async with engine.begin() as connection:
                await connection.execute(text(f"UPDATE {table} SET {column} = '{value}'"))
    async with engine.begin() as connection:  # positive control: a known value is fine
        await connection.execute(
            text("UPDATE orders SET status = 'cancelled' WHERE id = :id"), {"id": intent.order_id}
        )
        await connection.execute(text("UPDATE holds SET status = 'released'"))
        await connection.execute(text("UPDATE webhook_deliveries SET status = 'failed'"))


async def _a_webhook_delivery(engine: AsyncEngine, order_id: str) -> None:
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await session.get(Order, order_id)
        assert order is not None
        endpoint = WebhookEndpoint(
            id=new_id("whe"), account_id=order.account_id, url="https://x.test/", secret="s"
        )
        event = WebhookEvent(
            id=new_id("msg"), account_id=order.account_id, type="order.deployed", payload="{}"
        )
        session.add_all([endpoint, event])
        await session.flush()
        session.add(WebhookDelivery(id=new_id("whd"), event_id=event.id, endpoint_id=endpoint.id))


def test_the_docs_show_the_order_states_as_the_code_has_them() -> None:
    assert f"```mermaid\n{mermaid(ORDER_TRANSITIONS)}\n```" in STATES_PAGE.read_text()


def test_the_architecture_doc_shows_both_tables_as_the_code_has_them() -> None:
    doc = ARCHITECTURE.read_text()
    assert f"```mermaid\n{mermaid(ORDER_TRANSITIONS)}\n```" in doc
    assert f"```mermaid\n{mermaid(ATTEMPT_TRANSITIONS)}\n```" in doc
