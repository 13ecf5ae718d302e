"""Webhook endpoints, their deliveries, and redelivery."""

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from app.api.deps import CurrentAccount, SessionDep, SettingsDep, secret_boxes
from app.api.pagination import PageRequest, paged
from app.api.params import PathId
from app.api.schemas import Page
from app.api.strict_json import StrictJsonRoute
from app.api.webhook_schemas import (
    AttemptOut,
    DeliveryOut,
    EndpointCreate,
    EndpointOut,
    EndpointUpdate,
    EndpointWithSecret,
)
from app.services.webhooks import endpoints as webhook_endpoints
from app.services.webhooks import outbox
from app.storage.models import WebhookDelivery, WebhookEndpoint
from app.support.secrets import SecretBox

router = APIRouter(route_class=StrictJsonRoute, prefix="/v1/webhook-endpoints", tags=["webhooks"])
deliveries_router = APIRouter(
    route_class=StrictJsonRoute, prefix="/v1/webhook-deliveries", tags=["webhooks"]
)


def get_secret_box(request: Request) -> SecretBox:
    """The box that seals signing secrets at rest."""
    return secret_boxes(request).get()


SecretBoxDep = Annotated[SecretBox, Depends(get_secret_box)]


def _with_secret(endpoint: WebhookEndpoint, secret: str) -> EndpointWithSecret:
    return EndpointWithSecret(**EndpointOut.model_validate(endpoint).model_dump(), secret=secret)


def _delivery_out(
    delivery: WebhookDelivery, event_type: str, attempts: list[AttemptOut]
) -> DeliveryOut:
    return DeliveryOut(
        id=delivery.id,
        endpoint_id=delivery.endpoint_id,
        event_id=delivery.event_id,
        event_type=event_type,
        status=delivery.status,
        next_attempt_at=delivery.next_attempt_at,
        created_at=delivery.created_at,
        attempts=attempts,
    )


@router.post("", status_code=201)
async def create_endpoint(
    body: EndpointCreate,
    account: CurrentAccount,
    session: SessionDep,
    settings: SettingsDep,
    box: SecretBoxDep,
) -> EndpointWithSecret:
    """Register a URL for order events; the signing secret is in this response only."""
    endpoint, secret = await webhook_endpoints.create_endpoint(
        session,
        account_id=account.id,
        url=body.url,
        events=body.events,
        description=body.description,
        box=box,
        allow_private=settings.allows_private_webhooks,
        refused_ports=settings.own_ports,
        format=body.format,
    )
    return _with_secret(endpoint, secret)


@router.get("")
async def list_endpoints(
    account: CurrentAccount,
    session: SessionDep,
    page: Annotated[PageRequest, paged("whe")],
) -> Page[EndpointOut]:
    """The caller's webhook endpoints, newest first."""
    items = await webhook_endpoints.list_endpoints(
        session, account_id=account.id, cursor=page.cursor, limit=page.fetch
    )
    return page.page_of(items, EndpointOut)


@router.get("/{endpoint_id}")
async def get_endpoint(
    endpoint_id: PathId, account: CurrentAccount, session: SessionDep
) -> EndpointOut:
    """One webhook endpoint (without its secret)."""
    endpoint = await webhook_endpoints.get_endpoint(
        session, account_id=account.id, endpoint_id=endpoint_id
    )
    return EndpointOut.model_validate(endpoint)


@router.patch("/{endpoint_id}")
async def update_endpoint(
    endpoint_id: PathId,
    body: EndpointUpdate,
    account: CurrentAccount,
    session: SessionDep,
    settings: SettingsDep,
) -> EndpointOut:
    """Change the URL, the event types or whether it is enabled."""
    endpoint = await webhook_endpoints.update_endpoint(
        session,
        account_id=account.id,
        endpoint_id=endpoint_id,
        request=body.changes(),
        allow_private=settings.allows_private_webhooks,
        refused_ports=settings.own_ports,
    )
    return EndpointOut.model_validate(endpoint)


@router.delete("/{endpoint_id}", status_code=204)
async def delete_endpoint(
    endpoint_id: PathId, account: CurrentAccount, session: SessionDep
) -> Response:
    """Remove the endpoint and its delivery history."""
    await webhook_endpoints.delete_endpoint(session, account_id=account.id, endpoint_id=endpoint_id)
    return Response(status_code=204)


@router.post("/{endpoint_id}/rotate-secret")
async def rotate_secret(
    endpoint_id: PathId, account: CurrentAccount, session: SessionDep, box: SecretBoxDep
) -> EndpointWithSecret:
    """A new secret; for 24 hours deliveries carry signatures by both the new and the old."""
    endpoint, secret = await webhook_endpoints.rotate_secret(
        session, account_id=account.id, endpoint_id=endpoint_id, box=box
    )
    return _with_secret(endpoint, secret)


@router.get("/{endpoint_id}/deliveries")
async def list_deliveries(
    endpoint_id: PathId,
    account: CurrentAccount,
    session: SessionDep,
    page: Annotated[PageRequest, paged("whd")],
) -> Page[DeliveryOut]:
    """The endpoint's deliveries, newest first, each with every attempt's result."""
    await webhook_endpoints.get_endpoint(session, account_id=account.id, endpoint_id=endpoint_id)
    rows = await outbox.list_deliveries(
        session, endpoint_id=endpoint_id, cursor=page.cursor, limit=page.fetch
    )
    shown, next_cursor = page.split(rows, key=lambda r: r[0].id)
    data = [
        _delivery_out(delivery, event_type, [AttemptOut.model_validate(a) for a in attempts])
        for delivery, event_type, attempts in shown
    ]
    return Page(data=data, next_cursor=next_cursor)


@deliveries_router.post("/{delivery_id}/redeliver", status_code=202)
async def redeliver(
    delivery_id: PathId, account: CurrentAccount, session: SessionDep
) -> DeliveryOut:
    """Send the event again now (same webhook-id), starting its retry schedule over."""
    await webhook_endpoints.redeliver(session, account_id=account.id, delivery_id=delivery_id)
    row = await outbox.get_delivery(session, delivery_id=delivery_id)
    assert row is not None  # found just above, in this transaction
    delivery, event_type, attempts = row
    return _delivery_out(delivery, event_type, [AttemptOut.model_validate(a) for a in attempts])
