"""`GET /v1/admin/providers`: each provider's stock read, our balance there, recent creates;
`GET /v1/admin/orders`: every account's orders."""

from typing import Annotated

from fastapi import APIRouter
from pydantic import BaseModel

from app.api.deps import AdminOnly, SessionDep, SettingsDep
from app.api.offer_schemas import ProviderStatusOut
from app.api.order_responses import AdminOrderOut
from app.api.pagination import PageRequest, paged
from app.api.schemas import Page
from app.api.strict_json import StrictJsonRoute
from app.core.clock import utcnow
from app.core.states import OrderStatus
from app.providers.registry import enabled_providers
from app.services import orders, provider_status

router = APIRouter(
    route_class=StrictJsonRoute, prefix="/v1/admin", tags=["admin"], dependencies=[AdminOnly]
)


class ProvidersOut(BaseModel):
    """Every provider this service knows, configured or not."""

    data: list[ProviderStatusOut]


@router.get("/providers")
async def get_providers(session: SessionDep, settings: SettingsDep) -> ProvidersOut:
    """Each provider: enabled or not, last stock read, last balance read, creates in the last
    hour (admin key only)."""
    enabled = {str(p) for p in enabled_providers(settings)}
    report = await provider_status.report(session, now=utcnow(), enabled=enabled)
    return ProvidersOut(data=[ProviderStatusOut.present(status) for status in report])


@router.get("/orders")
async def list_every_order(
    session: SessionDep,
    page: Annotated[PageRequest, paged("ord")],
    status: OrderStatus | None = None,
) -> Page[AdminOrderOut]:
    """Every account's orders, newest first, optionally only those in one status, each with
    its account and its latest deployment (admin key only)."""
    items = await orders.list_orders(
        session, account_id=None, status=status, cursor=page.cursor, limit=page.fetch
    )
    shown, next_cursor = page.split(items, key=lambda o: o.id)
    attempts = await orders.latest_attempts(session, order_ids=[o.id for o in shown])
    data = [AdminOrderOut.present(order, attempts.get(order.id)) for order in shown]
    return Page(data=data, next_cursor=next_cursor)
