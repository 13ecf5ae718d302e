"""Orders: place, list, read, cancel, and the timeline of each."""

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import JSONResponse

from app.api.deps import (
    AccountOrAdmin,
    CurrentAccount,
    SessionDep,
    SettingsDep,
    nudge_terminator,
    nudge_watcher,
    secret_boxes,
)
from app.api.idempotent import IdempotencyKeyHeader, respond_once
from app.api.order_responses import (
    OrderEventOut,
    OrderOut,
    OrderPreviewOut,
    OrderWithEstimateOut,
)
from app.api.order_schemas import OrderCreate, OrderLimitsUpdate
from app.api.pagination import PageRequest, paged
from app.api.params import PathId
from app.api.schemas import Page
from app.api.stock_schemas import EstimateOut
from app.api.strict_json import StrictJsonRoute
from app.core.clock import utcnow
from app.core.market import Fees
from app.core.states import OrderStatus, TerminateReason
from app.providers.registry import enabled_providers
from app.services import machine_reports, orders, placing, terminations
from app.services.order_payload import AlternativeOut
from app.services.stock import estimate as stock_estimate
from app.storage.models import Order

router = APIRouter(route_class=StrictJsonRoute, prefix="/v1/orders", tags=["orders"])
ORDER_ESTIMATE_WINDOW = timedelta(days=7)


async def _present(session: SessionDep, items: list[Order]) -> list[OrderOut]:
    attempts = await orders.latest_attempts(session, order_ids=[o.id for o in items])
    return [OrderOut.present(order, attempts.get(order.id)) for order in items]


@router.post("", status_code=201, response_model=OrderOut)
async def place_order(
    body: OrderCreate,
    request: Request,
    account: CurrentAccount,
    session: SessionDep,
    settings: SettingsDep,
    after_commit: BackgroundTasks,
    idempotency_key: IdempotencyKeyHeader = None,
) -> JSONResponse:
    """Place an order; it waits, at no cost, until matching stock appears."""

    async def place() -> OrderOut:
        new = body.new_order(request.app.state.open_models)
        order = await placing.place_order(
            session,
            account_id=account.id,
            request=new,
            enabled=set(enabled_providers(settings)),
            max_waiting=settings.max_waiting_orders_per_account,
            max_per_hour=settings.max_placements_per_hour,
            # Loaded only for a script: a service that never seals one makes no key file.
            box=secret_boxes(request).get() if new.has_script else None,
            reports=machine_reports.report_url_for(settings) is not None,
        )
        return (await _present(session, [order]))[0]

    after_commit.add_task(nudge_watcher, request)
    return await respond_once(
        request,
        session,
        principal=account.id,
        key=idempotency_key,
        body=body,
        status_code=201,
        action=place,
    )


@router.post("/preview")
async def preview_order(
    body: OrderCreate, request: Request, account: CurrentAccount, session: SessionDep
) -> OrderPreviewOut:
    """What an order would be, placed now: its alternatives (an order by model, expanded),
    checked as placing checks them; nothing is written."""
    new = (await placing.preview(session, body.new_order(request.app.state.open_models))).request
    return OrderPreviewOut(
        model=new.model,
        prefer=new.prefer,
        alternatives=[AlternativeOut.model_validate(a.stored()) for a in new.alternatives],
        serve_engine=new.serve_engine,
        startup_script=new.startup_script if new.serve_engine else None,
    )


@router.get("")
async def list_orders(
    account: CurrentAccount,
    session: SessionDep,
    page: Annotated[PageRequest, paged("ord")],
    status: OrderStatus | None = None,
) -> Page[OrderOut]:
    """The caller's orders, newest first, optionally only those in one status."""
    items = await orders.list_orders(
        session, account_id=account.id, status=status, cursor=page.cursor, limit=page.fetch
    )
    shown, next_cursor = page.split(items, key=lambda o: o.id)
    return Page(data=await _present(session, shown), next_cursor=next_cursor)


@router.get("/{order_id}")
async def get_order(
    order_id: PathId, account: CurrentAccount, session: SessionDep, settings: SettingsDep
) -> OrderWithEstimateOut:
    """One order, with its deployment once there is one, and its expected wait while waiting."""
    order = await orders.get_order(session, account_id=account.id, order_id=order_id)
    out = (await _present(session, [order]))[0]
    estimate = await stock_estimate.order_estimate(
        session,
        order=order,
        fees=Fees(settings.fee_percent, settings.fee_flat_per_hour),
        window=ORDER_ESTIMATE_WINDOW,
    )
    shown = None if estimate is None else EstimateOut.of_window(estimate)
    return OrderWithEstimateOut(**dict(out), estimate=shown)


@router.get("/{order_id}/events")
async def list_events(
    order_id: PathId, account: CurrentAccount, session: SessionDep
) -> list[OrderEventOut]:
    """What happened to the order, oldest first, in sentences."""
    events = await orders.list_events(session, account_id=account.id, order_id=order_id)
    return [OrderEventOut.model_validate(e) for e in events]


@router.post("/{order_id}/cancel")
async def cancel_order(
    order_id: PathId,
    request: Request,
    account: CurrentAccount,
    session: SessionDep,
    after_commit: BackgroundTasks,
) -> OrderOut:
    """Cancel a waiting order (409 once it is deploying or later)."""
    order = await orders.cancel_order(session, account_id=account.id, order_id=order_id)
    after_commit.add_task(nudge_watcher, request)
    return (await _present(session, [order]))[0]


@router.post("/{order_id}/terminate", status_code=202)
async def terminate_order(
    order_id: PathId,
    request: Request,
    caller: AccountOrAdmin,
    session: SessionDep,
    after_commit: BackgroundTasks,
) -> OrderOut:
    """Delete the order's machine: the intent is committed, then the provider's delete is sent
    until the VM is gone, and the unused part of the hour paid is refunded. The owner's key, or
    the admin key for any order. Terminating again answers the same; a waiting order is a 409
    (cancel it instead)."""
    order = await terminations.request(
        session,
        order_id=order_id,
        account_id=None if caller is None else caller.id,
        reason=TerminateReason.REQUESTED if caller is not None else TerminateReason.ADMIN,
        now=utcnow(),
    )
    after_commit.add_task(nudge_terminator, request)
    return (await _present(session, [order]))[0]


@router.patch("/{order_id}")
async def update_order(
    order_id: PathId, body: OrderLimitsUpdate, account: CurrentAccount, session: SessionDep
) -> OrderOut:
    """Change the order's limits (`max_runtime_hours`, `max_total_usd`; null removes one) while
    its machine has not ended; nothing else of an order changes. A `max_total_usd` must cover
    what the order was charged, or before it deploys its first hour, as placing checks it."""
    order = await orders.update_limits(
        session, account_id=account.id, order_id=order_id, changes=body.changes()
    )
    return (await _present(session, [order]))[0]
