"""Orders: place, list, read, cancel, and the timeline of each."""

from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse

from app.api.deps import CurrentAccount, SessionDep
from app.api.pagination import Limit, cursor_param, next_cursor
from app.models import Order, OrderStatus
from app.schemas import DeploymentOut, OrderCreate, OrderEventOut, OrderOut, Page
from app.services import idempotency, orders

router = APIRouter(prefix="/v1/orders", tags=["orders"])


async def _present(session: SessionDep, items: list[Order]) -> list[OrderOut]:
    deployments = await orders.latest_deployments(session, order_ids=[o.id for o in items])
    presented = []
    for order in items:
        out = OrderOut.model_validate(order)
        deployment = deployments.get(order.id)
        if deployment is not None:
            out.deployment = DeploymentOut.model_validate(deployment)
        presented.append(out)
    return presented


@router.post("", status_code=201, response_model=OrderOut)
async def place_order(
    body: OrderCreate,
    request: Request,
    account: CurrentAccount,
    session: SessionDep,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> JSONResponse:
    """Place an order; it waits, at no cost, until matching stock appears."""

    async def place() -> object:
        order = await orders.place_order(session, account_id=account.id, request=body)
        return (await _present(session, [order]))[0].model_dump(mode="json")

    if idempotency_key is None:
        return JSONResponse(await place(), status_code=201)
    stored = await idempotency.run_once(
        session,
        account_id=account.id,
        key=idempotency_key,
        method=request.method,
        path=request.url.path,
        payload=body.model_dump(mode="json"),
        status_code=201,
        action=place,
    )
    headers = {"Idempotent-Replayed": "true"} if stored.replayed else None
    return JSONResponse(stored.body, status_code=stored.status_code, headers=headers)


@router.get("")
async def list_orders(
    account: CurrentAccount,
    session: SessionDep,
    status: OrderStatus | None = None,
    limit: Limit = 20,
    cursor: Annotated[str | None, cursor_param("ord")] = None,
) -> Page[OrderOut]:
    """The caller's orders, newest first, optionally only those in one status."""
    items = await orders.list_orders(
        session, account_id=account.id, status=status, cursor=cursor, limit=limit
    )
    return Page(
        data=await _present(session, items),
        next_cursor=next_cursor([o.id for o in items], limit),
    )


@router.get("/{order_id}")
async def get_order(order_id: str, account: CurrentAccount, session: SessionDep) -> OrderOut:
    """One order, with its deployment once there is one."""
    order = await orders.get_order(session, account_id=account.id, order_id=order_id)
    return (await _present(session, [order]))[0]


@router.get("/{order_id}/events")
async def list_events(
    order_id: str, account: CurrentAccount, session: SessionDep
) -> list[OrderEventOut]:
    """What happened to the order, oldest first, in sentences."""
    events = await orders.list_events(session, account_id=account.id, order_id=order_id)
    return [OrderEventOut.model_validate(e) for e in events]


@router.post("/{order_id}/cancel")
async def cancel_order(order_id: str, account: CurrentAccount, session: SessionDep) -> OrderOut:
    """Cancel a waiting order (409 once it is deploying or later)."""
    order = await orders.cancel_order(session, account_id=account.id, order_id=order_id)
    return (await _present(session, [order]))[0]
