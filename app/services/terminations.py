"""The database side of ending a machine (ARCHITECTURE.md, "The terminate protocol").

1. `request`: the intent is committed first: the order goes to `terminating` (compare-and-set)
   with its reason, and its machine's attempt, if it owns one, to `terminating` too. An order
   whose create is still in flight waits in `terminating` until the create settles (`adopt`).
2. The terminator sends the provider's delete outside any transaction, again and again with
   backoff (`note_delete_*`), until the provider shows the VM gone.
3. `settle_terminated` records the end in one commit: the attempt and the order `terminated`,
   the unused part of the hour paid refunded (once: a unique index), an event.

`settle_lost` is the same end for a machine the provider ended by itself.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy import func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Conflict
from app.core.money import format_usd
from app.core.states import (
    OPEN_ATTEMPTS,
    AttemptStatus,
    OrderEventKind,
    OrderStatus,
    TerminateReason,
    WebhookEventType,
    check_attempt_move,
    check_order_move,
)
from app.providers.registry import display_name, vm_named
from app.services import attempts, billing, orders, timeline
from app.services.timeline import Line
from app.services.webhooks import outbox
from app.storage.models import Attempt, Order

WHY = {
    TerminateReason.REQUESTED: "asked for by you",
    TerminateReason.ADMIN: "by the operator",
    TerminateReason.UNPAID: "a billing hour was not paid within the grace",
    TerminateReason.MAX_RUNTIME: "its max runtime was reached",
    TerminateReason.MAX_TOTAL: "the next hour would take it past its max total",
    TerminateReason.NODE_LOST: "its provider lost a node of the cluster",
}
MAX_RACES = 5  # a terminate that keeps losing compare-and-sets to the watcher gives up (a bug)


async def request(
    session: AsyncSession,
    *,
    order_id: str,
    account_id: str | None,
    reason: TerminateReason,
    now: datetime,
) -> Order:
    """Commit the intent to end an order's machine (`account_id` None: the admin's or the
    service's own terminate, of any account's order). Terminating twice is harmless.

    Raises NotFound for another account's order, Conflict for one with no machine to end.
    """
    for _ in range(MAX_RACES):
        order = await orders.get_order(session, account_id=account_id, order_id=order_id)
        if order.status in (OrderStatus.TERMINATING, OrderStatus.TERMINATED):
            return order
        if order.status is OrderStatus.WAITING:
            raise Conflict(
                f"order {order_id} is waiting: no machine runs yet; cancel it instead "
                f"(POST /v1/orders/{order_id}/cancel)",
                code="not_deployed",
            )
        if not order.status.can_terminate:
            raise Conflict(
                f"order {order_id} is {order.status}: it has no machine to terminate",
                code="order_ended",
            )
        if await _start(session, order, reason=reason, now=now):
            return await orders.get_order(session, account_id=account_id, order_id=order_id)
    raise Conflict(f"order {order_id} kept changing; try again", code="order_busy")


async def _start(
    session: AsyncSession, order: Order, *, reason: TerminateReason, now: datetime
) -> bool:
    """Move the order from the status it was read in to terminating; False if it moved."""
    check_order_move(order.status, OrderStatus.TERMINATING)
    moved = (
        await session.execute(
            update(Order)
            .where(Order.id == order.id, Order.status == order.status)
            .values(
                status=OrderStatus.TERMINATING,
                terminate_reason=reason,
                terminate_requested_at=now,
                updated_at=now,
            )
            .returning(Order.id)
            .execution_options(synchronize_session=False)
        )
    ).first()
    if moved is None:
        return False
    machine = await _start_deleting(session, order.id, now=now)
    waiting_for = "" if machine else " once the create in flight has its answer"
    await timeline.write(
        session,
        Line(
            order.id,
            OrderEventKind.TERMINATING,
            f"Terminating ({WHY[reason]}): the machine is deleted{waiting_for}.",
        ),
    )
    await outbox.emit(session, order_id=order.id, event_type=WebhookEventType.ORDER_TERMINATING)
    await session.flush()
    return True


async def _start_deleting(session: AsyncSession, order_id: str, *, now: datetime) -> bool:
    """The order's attempts that own a VM (not being deleted yet) start being deleted."""
    befores = (AttemptStatus.DEPLOYED, AttemptStatus.RUNNING)
    check_attempt_move(befores, AttemptStatus.TERMINATING)
    moved = await session.execute(
        update(Attempt)
        .where(Attempt.order_id == order_id, Attempt.status.in_(befores))
        .values(status=AttemptStatus.TERMINATING, next_delete_at=now, updated_at=now)
        .returning(Attempt.id)
        .execution_options(synchronize_session=False)
    )
    return moved.first() is not None


async def adopt(session: AsyncSession, *, now: datetime) -> list[str]:
    """Terminating orders whose create has settled since the terminate: a VM it made starts
    being deleted; if it made none, the order is terminated. Returns the orders terminated."""
    rows = (
        await session.execute(
            select(Order.id, Attempt.status)
            .outerjoin(Attempt, Attempt.order_id == Order.id)
            .where(Order.status == OrderStatus.TERMINATING)
        )
    ).all()
    statuses: dict[str, set[AttemptStatus | None]] = {}
    for order_id, status in rows:
        statuses.setdefault(order_id, set()).add(status)
    ended = []
    for order_id, seen in statuses.items():
        if seen & {AttemptStatus.DEPLOYED, AttemptStatus.RUNNING}:
            await _start_deleting(session, order_id, now=now)
        elif not seen & {*OPEN_ATTEMPTS, AttemptStatus.TERMINATING}:
            await _end_order(session, order_id, now=now, machine=None)
            ended.append(order_id)
    await session.flush()
    return ended


async def deletes_due(
    session: AsyncSession, *, now: datetime, providers: list[str]
) -> list[Attempt]:
    """Attempts at `providers` being deleted whose next delete is due, oldest first."""
    statement = (
        select(Attempt)
        .where(
            Attempt.status == AttemptStatus.TERMINATING,
            Attempt.provider.in_(providers),
            or_(Attempt.next_delete_at.is_(None), Attempt.next_delete_at <= now),
        )
        .order_by(Attempt.next_delete_at, Attempt.id)
    )
    return list((await session.execute(statement)).scalars())


async def next_delete_due(session: AsyncSession, *, providers: list[str]) -> datetime | None:
    """When the next delete of a machine terminating at `providers` is due (None: none is)."""
    return await session.scalar(
        select(func.min(Attempt.next_delete_at)).where(
            Attempt.status == AttemptStatus.TERMINATING,
            Attempt.provider.in_(providers),
        )
    )


async def note_running(session: AsyncSession, *, attempt_id: str, now: datetime) -> None:
    """A terminating machine not seen running before is running: it bills from `now`."""
    await session.execute(
        update(Attempt)
        .where(
            Attempt.id == attempt_id,
            Attempt.status == AttemptStatus.TERMINATING,
            Attempt.billed_from.is_(None),
        )
        .values(
            billed_from=now,
            running_at=func.coalesce(Attempt.running_at, now),
        )
        .execution_options(synchronize_session=False)
    )


async def note_delete_accepted(
    session: AsyncSession, *, attempt_id: str, now: datetime, check_in: timedelta
) -> None:
    """The provider took the delete (billing stops at the first time it did), or is still
    deleting: look again in `check_in`."""
    await session.execute(
        update(Attempt)
        .where(Attempt.id == attempt_id, Attempt.status == AttemptStatus.TERMINATING)
        .values(
            ended_at=func.coalesce(Attempt.ended_at, now),
            delete_attempts=Attempt.delete_attempts + 1,
            next_delete_at=now + check_in,
            updated_at=now,
        )
        .execution_options(synchronize_session=False)
    )


async def note_delete_failed(
    session: AsyncSession,
    *,
    attempt_id: str,
    now: datetime,
    retry_in: timedelta,
    message: str,
    sent: bool = True,
) -> None:
    """The delete failed or was refused (or, `sent` false, was held back before it went):
    try again in `retry_in`; say why on the timeline, once per reason. Only a delete that was
    sent counts as an attempt."""
    detail = message[:500]
    noted = (
        await session.execute(
            update(Attempt)
            .where(Attempt.id == attempt_id, Attempt.status == AttemptStatus.TERMINATING)
            .values(
                delete_attempts=Attempt.delete_attempts + int(sent),
                next_delete_at=now + retry_in,
                updated_at=now,
            )
            .returning(Attempt.order_id, Attempt.detail)
            .execution_options(synchronize_session=False)
        )
    ).first()
    if noted is None or noted.detail == detail:
        return
    await session.execute(update(Attempt).where(Attempt.id == attempt_id).values(detail=detail))
    await timeline.write(
        session,
        Line(
            noted.order_id,
            OrderEventKind.DELETE_RETRY,
            f"{message}: the delete is sent " + ("again." if sent else "when there is room."),
        ),
    )


@dataclass(frozen=True)
class Ended:
    """What ending one machine came to."""

    order_id: str
    refunded: Decimal
    charged: Decimal  # what the order paid for the machine in all


async def settle_terminated(
    session: AsyncSession, *, attempt_id: str, now: datetime
) -> Ended | None:
    """The provider shows the VM gone: the attempt and the order are terminated, the unused
    part of the hour paid comes back. None when someone settled it already."""
    attempt = await _end_machine(
        session,
        attempt_id,
        allowed=(AttemptStatus.TERMINATING,),
        status=AttemptStatus.TERMINATED,
        ended_at=now,
    )
    if attempt is None:
        return None
    return await _end_order(session, attempt.order_id, now=now, machine=attempt)


async def settle_lost(
    session: AsyncSession, *, attempt_id: str, seen_at: datetime, reported: str
) -> Ended | None:
    """The provider ended a running VM by itself: billing stops at `seen_at`, the unused part
    comes back, the order is lost. None when the attempt is not running any more."""
    attempt = await _end_machine(
        session,
        attempt_id,
        allowed=(AttemptStatus.RUNNING,),
        status=AttemptStatus.LOST,
        ended_at=seen_at,
        detail=reported,
    )
    if attempt is None:
        return None
    await attempts.move_order(
        session, attempt.order_id, expected=OrderStatus.RUNNING, status=OrderStatus.LOST
    )
    settled = await billing.settle_end(session, attempt, ended_at=seen_at)
    name = display_name(attempt.provider)
    await timeline.write(
        session,
        Line(
            attempt.order_id,
            OrderEventKind.LOST,
            f"{name} ended {vm_named(attempt.provider_vm_id)} ({reported}): billing stopped; "
            f"refunded {format_usd(settled.refunded)}, {format_usd(settled.charged)} charged "
            f"for it in all.{billing.overrun_said(settled)}",
        ),
    )
    await outbox.emit(session, order_id=attempt.order_id, event_type=WebhookEventType.ORDER_LOST)
    await session.flush()
    return Ended(attempt.order_id, settled.refunded, settled.charged)


async def _end_machine(
    session: AsyncSession,
    attempt_id: str,
    *,
    allowed: tuple[AttemptStatus, ...],
    status: AttemptStatus,
    ended_at: datetime,
    detail: str | None = None,
) -> Attempt | None:
    """Move the attempt to its end (compare-and-set); billing stopped at `ended_at` unless a
    delete taken earlier stopped it already."""
    extra = {} if detail is None else {"detail": detail[:500]}
    return await attempts.move_attempt(
        session,
        attempt_id,
        allowed=allowed,
        status=status,
        ended_at=func.coalesce(Attempt.ended_at, ended_at),
        **extra,
    )


async def _end_order(
    session: AsyncSession, order_id: str, *, now: datetime, machine: Attempt | None
) -> Ended:
    """A terminating order is terminated: its machine (if it had one) is settled."""
    await attempts.move_order(
        session, order_id, expected=OrderStatus.TERMINATING, status=OrderStatus.TERMINATED
    )
    if machine is None:
        message = "Terminated: no VM came of the create, so nothing ran and nothing was charged."
        ended = Ended(order_id, Decimal(0), Decimal(0))
    else:
        settled = await billing.settle_end(session, machine, ended_at=machine.ended_at or now)
        name = display_name(machine.provider)
        message = (
            f"Terminated: {name} shows {vm_named(machine.provider_vm_id)} gone; refunded "
            f"{format_usd(settled.refunded)} of the hour paid, {format_usd(settled.charged)} "
            f"charged for it in all.{billing.overrun_said(settled)}"
        )
        ended = Ended(order_id, settled.refunded, settled.charged)
    await timeline.write(session, Line(order_id, OrderEventKind.TERMINATED, message))
    await outbox.emit(session, order_id=order_id, event_type=WebhookEventType.ORDER_TERMINATED)
    await session.flush()
    return ended
