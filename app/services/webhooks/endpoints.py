"""Webhook endpoints: register, change, rotate the secret of, and remove them."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.clock import utcnow
from app.core.errors import Conflict, NotFound, ValidationFailed
from app.core.ids import new_id
from app.core.states import WebhookFormat
from app.core.text import quote
from app.services.webhooks import outbox
from app.services.webhooks.doorbell import ring_after_commit
from app.services.webhooks.urls import UrlRefused, resolve
from app.storage.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from app.support.secrets import SecretBox, new_signing_secret

MAX_ENDPOINTS_PER_ACCOUNT = 20
ROTATION_OVERLAP = timedelta(hours=24)


async def check_url(
    url: str, *, allow_private: bool, refused_ports: frozenset[int] = frozenset()
) -> None:
    """Refuse, as a 422 on `url`, an address webhooks may not go to.

    A name that does not resolve now is accepted: DNS may not be set up yet, and every
    delivery checks the address again before it connects.
    """
    try:
        await resolve(url, allow_private=allow_private, refused_ports=refused_ports)
    except UrlRefused as exc:
        if str(exc).startswith("cannot resolve"):
            return
        raise ValidationFailed(
            f"url: {exc}", details=[{"field": "url", "message": str(exc)}]
        ) from exc


@dataclass(frozen=True)
class EndpointChanges:
    """A change to an endpoint: only the fields named in `sent` change."""

    sent: frozenset[str]
    url: str | None = None
    events: Sequence[str] | None = None
    enabled: bool | None = None
    description: str | None = None
    format: WebhookFormat | None = None


async def create_endpoint(
    session: AsyncSession,
    *,
    account_id: str,
    url: str,
    events: Sequence[str] | None,
    description: str | None,
    box: SecretBox,
    allow_private: bool,
    format: WebhookFormat = WebhookFormat.STANDARD,
    refused_ports: frozenset[int] = frozenset(),
) -> tuple[WebhookEndpoint, str]:
    """A new enabled endpoint and its signing secret (returned in clear only here)."""
    await check_url(url, allow_private=allow_private, refused_ports=refused_ports)
    count = (
        await session.execute(
            select(func.count())
            .select_from(WebhookEndpoint)
            .where(WebhookEndpoint.account_id == account_id)
        )
    ).scalar_one()
    if count >= MAX_ENDPOINTS_PER_ACCOUNT:
        raise Conflict(
            f"an account can have at most {MAX_ENDPOINTS_PER_ACCOUNT} webhook endpoints",
            code="too_many_endpoints",
        )
    now = utcnow()
    endpoint_id = new_id("whe")
    secret = new_signing_secret()
    endpoint = WebhookEndpoint(
        id=endpoint_id,
        account_id=account_id,
        url=url,
        description=description,
        events=None if events is None else [str(e) for e in events],
        format=format,
        enabled=True,
        disabled_reason=None,
        secret=box.seal(endpoint_id, secret),
        previous_secret=None,
        previous_secret_expires_at=None,
        failing_since=None,
        created_at=now,
        updated_at=now,
    )
    session.add(endpoint)
    await session.flush()
    return endpoint, secret


async def get_endpoint(
    session: AsyncSession, *, account_id: str, endpoint_id: str
) -> WebhookEndpoint:
    """The account's endpoint; another account's is NotFound like a missing one."""
    endpoint = (
        await session.execute(
            select(WebhookEndpoint)
            .where(WebhookEndpoint.id == endpoint_id, WebhookEndpoint.account_id == account_id)
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()
    if endpoint is None:
        raise NotFound(f"no webhook endpoint {quote(endpoint_id)}")
    return endpoint


async def list_endpoints(
    session: AsyncSession, *, account_id: str, cursor: str | None, limit: int
) -> list[WebhookEndpoint]:
    """The account's endpoints, newest first."""
    statement = select(WebhookEndpoint).where(WebhookEndpoint.account_id == account_id)
    if cursor is not None:
        statement = statement.where(WebhookEndpoint.id < cursor)
    statement = statement.order_by(WebhookEndpoint.id.desc()).limit(limit)
    return list((await session.execute(statement)).scalars())


async def update_endpoint(
    session: AsyncSession,
    *,
    account_id: str,
    endpoint_id: str,
    request: EndpointChanges,
    allow_private: bool,
    refused_ports: frozenset[int] = frozenset(),
) -> WebhookEndpoint:
    """Change the fields sent; enabling an endpoint lets its waiting deliveries go again."""
    endpoint = await get_endpoint(session, account_id=account_id, endpoint_id=endpoint_id)
    sent = request.sent
    if "url" in sent:
        if request.url is None:
            raise ValidationFailed(
                "url: may not be null", details=[{"field": "url", "message": "may not be null"}]
            )
        await check_url(request.url, allow_private=allow_private, refused_ports=refused_ports)
        endpoint.url = request.url
    if "events" in sent:
        endpoint.events = None if request.events is None else [str(e) for e in request.events]
    if "description" in sent:
        endpoint.description = request.description
    if "format" in sent:
        if request.format is None:
            raise ValidationFailed(
                "format: may not be null",
                details=[{"field": "format", "message": "may not be null"}],
            )
        endpoint.format = request.format
    if "enabled" in sent and request.enabled is not None and request.enabled != endpoint.enabled:
        endpoint.enabled = request.enabled
        endpoint.disabled_reason = None if request.enabled else "disabled by you"
        endpoint.failing_since = None
        if request.enabled:
            ring_after_commit(session)
    endpoint.updated_at = utcnow()
    await session.flush()
    return endpoint


async def delete_endpoint(session: AsyncSession, *, account_id: str, endpoint_id: str) -> None:
    """Remove an endpoint with its deliveries and their attempts."""
    endpoint = await get_endpoint(session, account_id=account_id, endpoint_id=endpoint_id)
    deliveries = select(WebhookDelivery.id).where(WebhookDelivery.endpoint_id == endpoint.id)
    await session.execute(delete(WebhookAttempt).where(WebhookAttempt.delivery_id.in_(deliveries)))
    await session.execute(delete(WebhookDelivery).where(WebhookDelivery.endpoint_id == endpoint.id))
    await session.delete(endpoint)
    await session.flush()


async def rotate_secret(
    session: AsyncSession, *, account_id: str, endpoint_id: str, box: SecretBox
) -> tuple[WebhookEndpoint, str]:
    """A new signing secret; the current one keeps signing alongside it for 24 hours."""
    endpoint = await get_endpoint(session, account_id=account_id, endpoint_id=endpoint_id)
    secret = new_signing_secret()
    now = utcnow()
    endpoint.previous_secret = endpoint.secret
    endpoint.previous_secret_expires_at = now + ROTATION_OVERLAP
    endpoint.secret = box.seal(endpoint.id, secret)
    endpoint.updated_at = now
    await session.flush()
    return endpoint, secret


async def redeliver(session: AsyncSession, *, account_id: str, delivery_id: str) -> None:
    """Send a delivery again now, from the start of its schedule."""
    row = (
        await session.execute(
            select(WebhookDelivery, WebhookEndpoint)
            .join(WebhookEndpoint, WebhookEndpoint.id == WebhookDelivery.endpoint_id)
            .where(WebhookDelivery.id == delivery_id, WebhookEndpoint.account_id == account_id)
        )
    ).first()
    if row is None:
        raise NotFound(f"no webhook delivery {quote(delivery_id)}")
    delivery, endpoint = row
    if not endpoint.enabled:
        raise Conflict(
            f"webhook endpoint {endpoint.id} is disabled ({endpoint.disabled_reason}); "
            "enable it first",
            code="endpoint_disabled",
        )
    await outbox.redeliver(session, delivery_id=delivery.id, now=utcnow())
