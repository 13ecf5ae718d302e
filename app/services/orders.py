"""Orders: placing, reading, cancelling, and the timeline of what happened to each."""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.clock import utcnow
from app.core.errors import (
    Conflict,
    NotFound,
    ProvidersNotEnabled,
    TooManyOrders,
    field_error,
)
from app.core.ids import new_id
from app.core.money import format_usd
from app.core.states import OrderEventKind, OrderStatus, WebhookEventType, check_order_move
from app.core.text import quote
from app.providers.registry import abilities, display_name, spec_for
from app.services import images, startup_scripts, timeline
from app.services.limits import limits_line
from app.services.timeline import Line
from app.services.webhooks import outbox
from app.services.webhooks.secrets import SecretBox
from app.storage.models import Account, Attempt, Order, OrderEvent


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
    if not order.alternatives:
        return _describe_machine(order)
    return " or ".join(
        f"{_describe_machine(alternative)} at up to "
        f"{format_usd(Decimal(alternative['max_price_per_hour']))}/h"
        for alternative in order.alternatives
    )


@dataclass(frozen=True)
class NewAlternative:
    """One shape an order may take, already validated by whoever took it in (the API)."""

    gpu_model: str
    gpu_count: int
    providers: Sequence[str]
    max_price_per_hour: Decimal
    regions: list[str] | None = None
    min_disk_gb: int | None = None
    interconnect: str | None = None
    nodes: int = 1
    cluster_interconnect: str | None = None

    def stored(self) -> dict[str, Any]:
        """As `orders.alternatives` keeps it (JSON: the price as a string)."""
        return {
            "gpu_model": self.gpu_model,
            "gpu_count": self.gpu_count,
            "nodes": self.nodes,
            "providers": [str(p) for p in self.providers],
            "max_price_per_hour": str(self.max_price_per_hour),
            "regions": self.regions,
            "min_disk_gb": self.min_disk_gb,
            "interconnect": None if self.interconnect is None else str(self.interconnect),
            "cluster_interconnect": (
                None if self.cluster_interconnect is None else str(self.cluster_interconnect)
            ),
        }


@dataclass(frozen=True)
class NewOrder:
    """What a new order asks for, already validated by whoever took it in (the API): one or
    more alternatives (the first is its own machine; most orders have just that one)."""

    alternatives: Sequence[NewAlternative]
    prefer: str = "cheapest"
    model: str | None = None  # ordered by model: its id (the alternatives hold it)
    serve_engine: str | None = None  # the engine its generated start-up script serves it with
    on_node_lost: str = "keep"
    expires_at: datetime | None = None
    name: str | None = None
    ssh_public_key: str | None = None
    max_runtime_hours: Decimal | None = None
    max_total_usd: Decimal | None = None
    startup_script: str | None = None  # run once when its machine boots; sealed at rest
    image: str | None = None  # the OS image its machine boots, as its providers name it

    @property
    def first(self) -> NewAlternative:
        """Its first alternative: the order's own machine columns."""
        return self.alternatives[0]

    @property
    def providers(self) -> list[str]:
        """Every provider any of its alternatives accepts, in the order first named."""
        return list(dict.fromkeys(str(p) for a in self.alternatives for p in a.providers))


def _names(providers: Sequence[str]) -> str:
    names = [display_name(p) for p in providers]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def accepted_providers(order: Order) -> list[str]:
    """Every provider the order accepts: its own, or any of its alternatives'."""
    return _accepted(order.providers, order.alternatives)


def _accepted(providers: list[str], alternatives: list[dict[str, Any]] | None) -> list[str]:
    if not alternatives:
        return list(providers)
    return list(dict.fromkeys(p for a in alternatives for p in a["providers"]))


def _disabled_line(order: Order, disabled: Sequence[str]) -> Line:
    """The timeline line for a change in which of the order's providers can deploy."""
    candidates = sorted(
        abilities().deployable(accepted_providers(order), order),
        key=accepted_providers(order).index,
    )
    usable = [p for p in candidates if p not in disabled]
    if not disabled:
        text = f"{_names(candidates)}: all available on this service again."
    elif not usable:
        text = (
            f"{_names(disabled)}: not available on this service (no credentials configured); "
            "this order cannot deploy anywhere until they are."
        )
    else:
        text = (
            f"{_names(disabled)}: not available on this service (no credentials configured); "
            f"this order can deploy only on {_names(usable)}."
        )
    return Line(order.id, OrderEventKind.PROVIDERS_DISABLED, text)


def _check_clusters(alternative: NewAlternative, prefix: str) -> None:
    """Refuse a cluster that one of the alternative's providers cannot make, saying why."""
    if alternative.cluster_interconnect is not None and alternative.nodes == 1:
        raise field_error(
            f"{prefix}cluster_interconnect", "is for clusters: set nodes to 2 or more"
        )
    for provider in alternative.providers:
        why = spec_for(provider).cluster_refusal(
            alternative.gpu_model,
            alternative.gpu_count,
            alternative.nodes,
            alternative.cluster_interconnect,
        )
        if why is not None:
            shape = f"{alternative.nodes} nodes of {alternative.gpu_count}x {alternative.gpu_model}"
            raise field_error(
                f"{prefix}providers", f"{display_name(provider)} {why}: it cannot deploy {shape}"
            )


def check_request(request: NewOrder) -> None:
    """What placing an order checks before it looks at the account (422 naming the field)."""
    dearest = max(a.max_price_per_hour for a in request.alternatives)
    if request.max_total_usd is not None and request.max_total_usd < dearest:
        raise field_error(
            "max_total_usd",
            f"must cover at least one hour at max_price_per_hour "
            f"({format_usd(dearest)}): the first hour is paid at deploy",
        )
    listed = len(request.alternatives) > 1
    for position, alternative in enumerate(request.alternatives):
        _check_clusters(alternative, f"alternatives.{position}." if listed else "")


async def check_image(
    session: AsyncSession, request: NewOrder
) -> tuple[NewOrder, images.ImageCheck]:
    """Check the order's image, if it names one, against its providers' image lists as the
    watcher last read them: the order without the providers that list no such image (an
    alternative left with none is left out), and what was found. A 422 naming `image` when
    it cannot boot anywhere the order accepts."""
    if request.image is None:
        return request, images.ImageCheck([], [], {})
    wanted = [images.Wanted(a.providers, a.nodes > 1) for a in request.alternatives]
    found = images.check(request.image, wanted, await images.known(session))
    kept = []
    for position, alternative in enumerate(request.alternatives):
        unlisted = found.unlisted.get(position, [])
        providers = [p for p in alternative.providers if str(p) not in unlisted]
        if providers:
            kept.append(replace(alternative, providers=providers))
    return replace(request, alternatives=kept), found


async def place_order(
    session: AsyncSession,
    *,
    account_id: str,
    request: NewOrder,
    enabled: Collection[str],
    max_waiting: int,
    box: SecretBox | None = None,
) -> Order:
    """A new waiting order; placing it costs nothing. `enabled`: the providers this service
    can deploy on; an order that accepts none of them is refused, as is one past the
    account's `max_waiting` orders waiting. `box` seals its start-up script, if it has one."""
    check_request(request)
    request, imaged = await check_image(session, request)
    listed = len(request.alternatives) > 1
    scriptless = startup_scripts.check(request.startup_script, request.providers)
    disabled = [str(p) for p in request.providers if str(p) not in enabled]
    candidates = [
        str(p)
        for p in request.providers
        if str(p) not in scriptless and str(p) not in imaged.stock_only
    ]
    if all(p in disabled for p in candidates):
        runs = " and runs start-up scripts" if scriptless else ""
        runs += " and lets an order choose its image" if imaged.stock_only else ""
        raise ProvidersNotEnabled(
            f"{_names([p for p in candidates if p in disabled])}: not available on this "
            f"service (no credentials configured); accept at least one provider that is{runs}",
            details={"disabled_providers": disabled},
        )
    await _check_room(session, account_id, max_waiting)
    now = utcnow()
    order_id = new_id("ord")
    script = (
        None
        if request.startup_script is None
        else startup_scripts.seal(box, order_id, request.startup_script)
    )
    order = Order(
        id=order_id,
        account_id=account_id,
        status=OrderStatus.WAITING,
        gpu_model=request.first.gpu_model,
        gpu_count=request.first.gpu_count,
        providers=[str(p) for p in request.first.providers],
        disabled_providers=disabled or None,
        max_price_per_hour=request.first.max_price_per_hour,
        regions=request.first.regions,
        min_disk_gb=request.first.min_disk_gb,
        interconnect=request.first.interconnect,
        nodes=request.first.nodes,
        cluster_interconnect=request.first.cluster_interconnect,
        alternatives=[a.stored() for a in request.alternatives] if listed else None,
        prefer=request.prefer,
        model=request.model,
        serve_engine=request.serve_engine,
        on_node_lost=request.on_node_lost,
        expires_at=request.expires_at,
        name=request.name,
        ssh_public_key=request.ssh_public_key,
        max_runtime_hours=request.max_runtime_hours,
        max_total_usd=request.max_total_usd,
        startup_script=None if script is None else script.sealed,
        startup_script_sha256=None if script is None else script.sha256,
        startup_script_bytes=None if script is None else script.size,
        image=request.image,
        created_at=now,
        updated_at=now,
    )
    session.add(order)
    await session.flush()
    await timeline.write(
        session,
        Line(
            order.id,
            OrderEventKind.PLACED,
            _placed_line(order),
        ),
        *([startup_scripts.placed_line(order.id, scriptless, candidates)] if scriptless else []),
        *(
            images.placed_lines(order.id, request.image, imaged, candidates)
            if request.image
            else []
        ),
        *([_disabled_line(order, disabled)] if disabled else []),
    )
    return order


def _placed_line(order: Order) -> str:
    by_model = f"for {order.model}, " if order.model else ""
    if not order.alternatives:
        return (
            f"Order placed: {by_model}{describe_request(order)} at up to "
            f"{format_usd(order.max_price_per_hour)}/h incl. fees. Waiting for stock."
        )
    which = (
        "the first of them, in this order, that shows"
        if order.prefer == "listed"
        else "whichever is cheapest when stock shows"
    )
    return (
        f"Order placed: {by_model}{describe_request(order)}, incl. fees; one of them will "
        f"deploy ({which}). Waiting for stock."
    )


async def _check_room(session: AsyncSession, account_id: str, max_waiting: int) -> None:
    # The account's row is locked first (on PostgreSQL; SQLite has one writer anyway), so
    # two placements at once cannot both see room for one more. FOR NO KEY UPDATE: a plain
    # FOR UPDATE would also wait on every open transaction that inserted a row referencing
    # the account (the event publisher, a debit), which is not a placement.
    await session.execute(
        select(Account.id).where(Account.id == account_id).with_for_update(key_share=True)
    )
    waiting = await session.scalar(
        select(func.count())
        .select_from(Order)
        .where(Order.account_id == account_id, Order.status == OrderStatus.WAITING)
    )
    if (waiting or 0) >= max_waiting:
        raise TooManyOrders(
            f"this account already has {max_waiting} orders waiting, the most it may; "
            "cancel one, or wait for one to deploy",
            details={"max_waiting_orders": max_waiting},
        )


async def note_disabled_providers(session: AsyncSession, *, enabled: Collection[str]) -> int:
    """Record, on every waiting order, which of its providers this service cannot deploy on
    now (credentials added or removed since it last looked), with a line per change; returns
    how many orders changed."""
    # The columns first, and whole orders only for those that change: with 100,000 waiting,
    # loading every order took 400 MB at each watcher start.
    columns = select(Order.id, Order.providers, Order.alternatives, Order.disabled_providers)
    rows = await session.execute(columns.where(Order.status == OrderStatus.WAITING))
    due = [
        order_id
        for order_id, providers, alternatives, was in rows
        if [p for p in _accepted(providers, alternatives) if p not in enabled] != (was or [])
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
            changed.append(_disabled_line(order, disabled))
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
    account_id: str,
    status: OrderStatus | None,
    cursor: str | None,
    limit: int,
) -> list[Order]:
    """The account's orders, newest first, starting after `cursor` (an order id)."""
    statement = select(Order).where(Order.account_id == account_id)
    if status is not None:
        statement = statement.where(Order.status == status)
    if cursor is not None:
        statement = statement.where(Order.id < cursor)
    statement = statement.order_by(Order.id.desc()).limit(limit)
    return list((await session.execute(statement)).scalars())


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


async def update_limits(
    session: AsyncSession,
    *,
    account_id: str,
    order_id: str,
    changes: Mapping[str, Decimal | None],
) -> Order:
    """Change an order's limits (a None removes one) until its machine has ended.

    A total below what the order was charged already is refused (ValidationFailed naming the
    field), as is any change to an order that has ended (Conflict). The timeline says when the
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
    total = changes.get("max_total_usd")
    if machine is not None and total is not None and total < machine.charged:
        raise field_error(
            "max_total_usd",
            f"must be at least what the order was charged already ({format_usd(machine.charged)})",
        )
    if machine is None and total is not None and total < order.max_price_per_hour:
        raise field_error(
            "max_total_usd",
            f"must cover at least one hour at max_price_per_hour "
            f"({format_usd(order.max_price_per_hour)}): the first hour is paid at deploy",
        )
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
