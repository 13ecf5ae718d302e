"""Placing an order: what placing checks (`preview`, which an order by model is expanded in),
and the order it makes. What a new order asks for is `order_request`."""

from collections.abc import Collection
from dataclasses import dataclass, replace

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.clock import utcnow
from app.core.drivers import SERVE_MIN_DRIVER
from app.core.errors import (
    ProvidersNotEnabled,
    TooManyOrders,
    field_error,
)
from app.core.ids import new_id
from app.core.money import format_usd
from app.core.states import OrderEventKind, OrderStatus
from app.open_models.serving import Serving
from app.open_models.serving import startup_script as serve_script
from app.providers.registry import display_name, spec_for
from app.services import (
    images,
    machine_reports,
    model_fit,
    orders,
    placement_rate,
    startup_scripts,
    timeline,
)
from app.services.order_request import NewAlternative, NewOrder
from app.services.timeline import Line
from app.storage.models import Account, Order
from app.support.secrets import SecretBox


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
    orders.check_covers_first_hour(request.max_total_usd, dearest, "max_price_per_hour")
    listed = len(request.alternatives) > 1
    for position, alternative in enumerate(request.alternatives):
        _check_clusters(alternative, f"alternatives.{position}." if listed else "")


def wanted(request: NewOrder) -> list[images.Wanted]:
    """The order's alternatives as the image check sees them."""
    return [
        images.Wanted(a.providers, a.gpu_model, a.gpu_count, a.nodes, a.regions)
        for a in request.alternatives
    ]


async def check_image(
    session: AsyncSession, request: NewOrder
) -> tuple[NewOrder, images.ImageCheck]:
    """Check the order's image, if it names one, and the driver its serve script needs, if it
    serves a model, against its providers' image lists as the watcher last read them: the
    order without the providers where its machine cannot boot them (an alternative left with
    none is left out), and what was found. A 422 naming `image` (or `serve`) when it cannot
    deploy anywhere it accepts."""
    need = SERVE_MIN_DRIVER if request.serve_engine is not None else None
    if request.image is None and need is None:
        return request, images.NO_CHECK
    found = images.check(
        request.image, wanted(request), await images.known(session), min_driver=need
    )
    kept = []
    for position, alternative in enumerate(request.alternatives):
        unfit = found.unlisted.get(position, [])
        providers = [p for p in alternative.providers if str(p) not in unfit]
        if providers:
            kept.append(replace(alternative, providers=providers))
    return replace(request, alternatives=kept), found


def expand(request: NewOrder) -> NewOrder:
    """An order by model as its alternatives, with the start-up script that serves the model
    when it asks for one (422 naming the field when nothing holds the model, or when it gives a
    script of its own too); any other order as it is."""
    by_model = request.by_model
    if by_model is None:
        return request
    script = request.startup_script
    if request.serve_engine is not None:
        if script is not None:
            raise field_error(
                "startup_script", "serve writes the start-up script: give one of them"
            )
        script = serve_script(Serving(by_model.model, request.serve_engine))
    return replace(
        request,
        alternatives=tuple(model_fit.alternatives_for(by_model)),
        by_model=None,
        startup_script=script,
    )


@dataclass(frozen=True)
class Previewed:
    """An order as placing would make it: expanded, checked, and left without the providers
    where its machine cannot boot its image; what its image and start-up script allow."""

    request: NewOrder
    shapes: list[images.Wanted]  # its alternatives before the image check left any out
    imaged: images.ImageCheck
    scriptless: list[str]  # providers that cannot run its start-up script


async def preview(session: AsyncSession, request: NewOrder) -> Previewed:
    """What placing `request` checks before it looks at the account, and what it would make of
    it; `POST /v1/orders/preview` shows this, and placing starts with it. Writes nothing."""
    request = expand(request)
    check_request(request)
    shapes = wanted(request)
    request, imaged = await check_image(session, request)
    scriptless = startup_scripts.check(request.startup_script, request.providers)
    return Previewed(request, shapes, imaged, scriptless)


async def place_order(
    session: AsyncSession,
    *,
    account_id: str,
    request: NewOrder,
    enabled: Collection[str],
    max_waiting: int,
    max_per_hour: int | None = None,
    box: SecretBox | None = None,
    reports: bool = True,
) -> Order:
    """A new waiting order; placing it costs nothing. `enabled`: the providers this service
    can deploy on; an order that accepts none of them is refused, as is one past the
    account's `max_waiting` orders waiting or its `max_per_hour` placements in the last hour.
    `box` seals its start-up script, if it has one; `reports`: whether machines can report to
    this service (an order serving a model says so when they cannot)."""
    previewed = await preview(session, request)
    request, imaged, scriptless = previewed.request, previewed.imaged, previewed.scriptless
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
            f"{orders.names_of([p for p in candidates if p in disabled])}: not available on this "
            f"service (no credentials configured); accept at least one provider that is{runs}",
            details={"disabled_providers": disabled},
        )
    await _check_room(session, account_id, max_waiting)
    now = utcnow()
    if max_per_hour is not None:
        await placement_rate.check(session, account_id=account_id, per_hour=max_per_hour, now=now)
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
        alternatives=[a.stored() for a in request.alternatives],
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
    unreported = order.serve_engine is not None and not reports
    await timeline.write(
        session,
        Line(
            order.id,
            OrderEventKind.PLACED,
            _placed_line(order),
        ),
        *([startup_scripts.placed_line(order.id, scriptless, candidates)] if scriptless else []),
        *images.placed_lines(order.id, request.image, imaged, candidates, previewed.shapes),
        *([orders.disabled_line(order, disabled)] if disabled else []),
        *([machine_reports.unreported_line(order.id)] if unreported else []),
    )
    return order


def _placed_line(order: Order) -> str:
    by_model = f"for {order.model}, " if order.model else ""
    if len(order.alternatives) == 1:
        return (
            f"Order placed: {by_model}{orders.describe_request(order)} at up to "
            f"{format_usd(order.max_price_per_hour)}/h incl. fees. Waiting for stock."
        )
    which = (
        "the first of them, in this order, that shows"
        if order.prefer == "listed"
        else "whichever is cheapest when stock shows"
    )
    return (
        f"Order placed: {by_model}{orders.describe_request(order)}, incl. fees; one of them will "
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
