"""Orders once placed: reading, cancelling, their limits, expiry, and how they are described
(placing them is `placing`)."""

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.clock import utcnow
from app.core.errors import (
    Conflict,
    NotFound,
    field_error,
)
from app.core.money import format_usd
from app.core.states import OrderEventKind, OrderStatus, WebhookEventType, check_order_move
from app.core.text import quote
from app.providers.registry import abilities, display_name
from app.services import timeline
from app.services.limits import limits_line
from app.services.timeline import Line
from app.services.webhooks import outbox
from app.storage.models import Attempt, Order, OrderEvent


def _describe_machine(machine: Any) -> str:
    """`8x B300 on Verda or Hyperstack`, `2 nodes of 8x H200 (infiniband) on Verda in FIN-01`:
    an order's machine (its columns) or one of its alternatives (the same names)."""

    def get(name: str) -> Any:
        return machine[name] if isinstance(machine, dict) else getattr(machine, name)

    names = [display_name(p) for p in get("providers")]
    where = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    text = f"{get('gpu_count')}x {get('gpu_model')}"
    if (get("nodes") or 1) > 1:
        fabric = get("cluster_interconnect")
        text = f"{get('nodes')} nodes of {text}{f' ({fabric})' if fabric else ''}"
    text = f"{text} on {where}"
    if get("regions"):
        text += f" in {', '.join(get('regions'))}"
    return text


def describe_request(order: Order) -> str:
    """What the order asks for, as a person would say it: `8x B300 on Verda or Hyperstack`,
    `2 nodes of 8x H200 on Verda`; with alternatives, each with its price cap."""
    if len(order.alternatives) == 1:
        return _describe_machine(order)
    return " or ".join(
        f"{_describe_machine(alternative)} at up to "
        f"{format_usd(Decimal(alternative['max_price_per_hour']))}/h"
        for alternative in order.alternatives
    )


def names_of(providers: Sequence[str]) -> str:
    names = [display_name(p) for p in providers]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def accepted_providers(order: Order) -> list[str]:
    """Every provider any of the order's alternatives accepts, in the order first named."""
    return _accepted(order.alternatives)


def _accepted(alternatives: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(p for a in alternatives for p in a["providers"]))


def disabled_line(order: Order, disabled: Sequence[str]) -> Line:
    """The timeline line for a change in which of the order's providers can deploy."""
    candidates = sorted(
        abilities().deployable(accepted_providers(order), order),
        key=accepted_providers(order).index,
    )
    usable = [p for p in candidates if p not in disabled]
    if not disabled:
        text = f"{names_of(candidates)}: all available on this service again."
    elif not usable:
        text = (
            f"{names_of(disabled)}: not available on this service (no credentials configured); "
            "this order cannot deploy anywhere until they are."
        )
    else:
        text = (
            f"{names_of(disabled)}: not available on this service (no credentials configured); "
            f"this order can deploy only on {names_of(usable)}."
        )
    return Line(order.id, OrderEventKind.PROVIDERS_DISABLED, text)


async def note_disabled_providers(session: AsyncSession, *, enabled: Collection[str]) -> int:
    """Record, on every waiting order, which of its providers this service cannot deploy on
    now (credentials added or removed since it last looked), with a line per change; returns
    how many orders changed."""
    # The columns first, and whole orders only for those that change: with 100,000 waiting,
    # loading every order took 400 MB at each watcher start.
    columns = select(Order.id, Order.alternatives, Order.disabled_providers)
    rows = await session.execute(columns.where(Order.status == OrderStatus.WAITING))
    due = [
        order_id
        for order_id, alternatives, was in rows
        if [p for p in _accepted(alternatives) if p not in enabled] != (was or [])
    ]
    changed = []
    for first in range(0, len(due), 1000):
        query = select(Order).where(
            Order.id.in_(due[first : first + 1000]), Order.status == OrderStatus.WAITING
        )
        for order in (await session.execute(query)).scalars():
            disabled = [p for p in accepted_providers(order) if p not in enabled]
            order.disabled_providers = disabled or None
            order.updated_at = utcnow()
            changed.append(disabled_line(order, disabled))
    await session.flush()
    await timeline.write(session, *changed)
    return len(changed)


async def get_order(session: AsyncSession, *, account_id: str | None, order_id: str) -> Order:
    """The account's order with this id; another account's order is NotFound like a missing one.
    `account_id` None: any account's (the admin's, or the service's own, look-up)."""
    statement = select(Order).where(Order.id == order_id)
    if account_id is not None:
        statement = statement.where(Order.account_id == account_id)
    order = (
        await session.execute(statement.execution_options(populate_existing=True))
    ).scalar_one_or_none()
    if order is None:
        raise NotFound(f"no order {quote(order_id)}")
    return order


async def list_orders(
    session: AsyncSession,
    *,
    account_id: str | None,
    status: OrderStatus | None,
    cursor: str | None,
    limit: int,
) -> list[Order]:
    """The account's orders (`account_id` None: every account's, the admin's), newest first,
    starting after `cursor` (an order id)."""
    statement = select(Order)
    if account_id is not None:
        statement = statement.where(Order.account_id == account_id)
    if status is not None:
        statement = statement.where(Order.status == status)
    if cursor is not None:
        statement = statement.where(Order.id < cursor)
    statement = statement.order_by(Order.id.desc()).limit(limit)
    return list((await session.execute(statement)).scalars())


async def waiting_shapes(session: AsyncSession, *, limit: int = 200) -> list[dict[str, Any]]:
    """The machine shapes the newest `limit` waiting orders wait for, each alternative apart
    (`gpu_model`, `gpu_count`, `nodes`, `providers`, `regions`, `max_price_per_hour`): what
    demo mode's stock feed puts up."""
    rows = await session.scalars(
        select(Order.alternatives)
        .where(Order.status == OrderStatus.WAITING)
        .order_by(Order.id.desc())
        .limit(limit)
    )
    return [shape for alternatives in rows for shape in alternatives]


async def cancel_order(session: AsyncSession, *, account_id: str, order_id: str) -> Order:
    """Cancel a waiting order; any other state is a Conflict that says why."""
    order = await get_order(session, account_id=account_id, order_id=order_id)
    check_order_move(OrderStatus.WAITING, OrderStatus.CANCELLED)
    cancelled = (
        await session.execute(
            update(Order)
            .where(Order.id == order.id, Order.status == OrderStatus.WAITING)
            .values(status=OrderStatus.CANCELLED, updated_at=utcnow())
            .returning(Order.id)
            .execution_options(synchronize_session=False)
        )
    ).first()
    order = await get_order(session, account_id=account_id, order_id=order_id)
    if cancelled is None:
        raise Conflict(
            f"order {order_id} is {order.status}; only a waiting order can be cancelled",
            code="order_not_waiting",
        )
    await timeline.write(session, Line(order.id, OrderEventKind.CANCELLED, "Cancelled by you."))
    await outbox.emit(session, order_id=order.id, event_type=WebhookEventType.ORDER_CANCELLED)
    await session.flush()
    return order


# What a limit already passed would have done, said where such a limit is refused.
ENDS_NOW = "to end the machine now, terminate the order"


async def update_limits(
    session: AsyncSession,
    *,
    account_id: str,
    order_id: str,
    changes: Mapping[str, Decimal | None],
) -> Order:
    """Change an order's limits (a None removes one) until its machine has ended.

    A total below what the order was charged already, or a runtime its machine has billed
    already, is refused (ValidationFailed naming the field), as is any change to an order that
    has ended (Conflict). The timeline says when the
    new limits end the machine.
    """
    order = await get_order(session, account_id=account_id, order_id=order_id)
    if order.status.is_final or order.status is OrderStatus.TERMINATING:
        raise Conflict(
            f"order {order_id} is {order.status}: its limits can no longer change",
            code="order_ended",
        )
    attempt = (await latest_attempts(session, order_ids=[order.id])).get(order.id)
    machine = attempt if attempt is not None and attempt.status.owns_vm else None
    total, runtime = changes.get("max_total_usd"), changes.get("max_runtime_hours")
    if machine is not None and total is not None and total < machine.charged:
        raise field_error(
            "max_total_usd",
            f"must be at least what the order was charged already ({format_usd(machine.charged)})"
            f"; {ENDS_NOW}",
        )
    if machine is not None and runtime is not None and machine.billed_from is not None:
        billed = (utcnow() - machine.billed_from).total_seconds() / machine.billing_hour_seconds
        if runtime <= Decimal(str(billed)):
            raise field_error(
                "max_runtime_hours",
                f"must be more than the hours the machine has billed already ({billed:.1f} h)"
                f"; {ENDS_NOW}",
            )
    if machine is None and attempt is not None and attempt.status.is_open:
        # Its create is in flight: the hour held for it is what the limit must cover.
        held = attempt.price_per_hour_with_fees
        check_covers_first_hour(total, held, "the price its create holds")
    elif machine is None:
        check_covers_first_hour(total, dearest_cap(order), "max_price_per_hour")
    if not changes:
        return order
    await session.execute(
        update(Order)
        .where(Order.id == order.id)
        .values(**changes, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    order = await get_order(session, account_id=account_id, order_id=order_id)
    said = ", ".join(
        f"{name} {'removed' if value is None else _limit(name, value)}"
        for name, value in sorted(changes.items())
    )
    lines = [Line(order.id, OrderEventKind.LIMITS, f"Limits changed: {said}.")]
    if machine is not None:
        end = limits_line(order, machine)
        if end is not None:
            lines.append(end)
    await timeline.write(session, *lines)
    return order


def dearest_cap(order: Order) -> Decimal:
    """The dearest price cap of the order's shapes (its alternatives, by model or listed): the
    most its first hour may cost, held when it deploys."""
    return max(Decimal(alternative["max_price_per_hour"]) for alternative in order.alternatives)


def check_covers_first_hour(total: Decimal | None, hour: Decimal, what: str) -> None:
    """Refuse a `max_total_usd` below `hour`, what the first hour may cost at `what` (a 422
    naming the field): that hour is paid at deploy, so no lower limit can hold."""
    if total is not None and total < hour:
        raise field_error(
            "max_total_usd",
            f"must cover at least one hour at {what} ({format_usd(hour)}): the first hour is "
            "paid at deploy",
        )


def _limit(name: str, value: Decimal) -> str:
    return format_usd(value) if name == "max_total_usd" else f"{value.normalize():f} h"


async def list_events(session: AsyncSession, *, account_id: str, order_id: str) -> list[OrderEvent]:
    """The order's timeline, oldest first."""
    await get_order(session, account_id=account_id, order_id=order_id)
    statement = select(OrderEvent).where(OrderEvent.order_id == order_id).order_by(OrderEvent.id)
    return list((await session.execute(statement)).scalars())


async def latest_attempts(session: AsyncSession, *, order_ids: Sequence[str]) -> dict[str, Attempt]:
    """The newest deployment attempt of each order that has one."""
    if not order_ids:
        return {}
    statement = (
        select(Attempt)
        .where(Attempt.order_id.in_(order_ids))
        .order_by(Attempt.order_id, Attempt.number)
    )
    return {d.order_id: d for d in (await session.execute(statement)).scalars()}


async def count_by_status(session: AsyncSession) -> dict[OrderStatus, int]:
    """How many orders are in each status (statuses with none are left out)."""
    rows = await session.execute(select(Order.status, func.count()).group_by(Order.status))
    return {OrderStatus(status): count for status, count in rows.all()}


async def expire_due(session: AsyncSession, *, now: datetime) -> list[str]:
    """Waiting orders past their `expires_at` become expired; returns their ids."""
    check_order_move(OrderStatus.WAITING, OrderStatus.EXPIRED)
    expired = (
        (
            await session.execute(
                update(Order)
                .where(
                    Order.status == OrderStatus.WAITING,
                    Order.expires_at.is_not(None),
                    Order.expires_at <= now,
                )
                .values(status=OrderStatus.EXPIRED, updated_at=now)
                .returning(Order.id)
                .execution_options(synchronize_session=False)
            )
        )
        .scalars()
        .all()
    )
    for order_id in expired:
        await timeline.write(
            session,
            Line(
                order_id,
                OrderEventKind.EXPIRED,
                "Expired before matching stock appeared: stopped waiting.",
            ),
        )
        await outbox.emit(session, order_id=order_id, event_type=WebhookEventType.ORDER_EXPIRED)
    await session.flush()
    return list(expired)
