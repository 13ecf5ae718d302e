"""An endpoint's health: since when it fails, and disabling it (after days of failures, on a
410, or by the operator), told on the account's timeline."""

from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.clock import utcnow
from app.services import account_events
from app.storage.models import WebhookEndpoint


async def note_success(session: AsyncSession, *, endpoint_id: str) -> None:
    """A delivery to the endpoint succeeded: it is failing no longer."""
    await session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.id == endpoint_id)
        .values(failing_since=None)
        .execution_options(synchronize_session=False)
    )


async def note_failure(
    session: AsyncSession,
    *,
    endpoint_id: str,
    account_id: str,
    now: datetime,
    disable_after: timedelta,
) -> None:
    """Note since when the endpoint fails; past `disable_after` without a success, disable it."""
    await session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.id == endpoint_id, WebhookEndpoint.failing_since.is_(None))
        .values(failing_since=now)
        .execution_options(synchronize_session=False)
    )
    failing_since = (
        await session.execute(
            select(WebhookEndpoint.failing_since).where(WebhookEndpoint.id == endpoint_id)
        )
    ).scalar_one_or_none()
    if failing_since is not None and now - failing_since >= disable_after:
        hours = (now - failing_since).total_seconds() / 3600
        await disable_endpoint(
            session,
            endpoint_id=endpoint_id,
            account_id=account_id,
            reason=f"no successful delivery for {hours:.0f} hours",
        )


async def disable_endpoint(
    session: AsyncSession, *, endpoint_id: str, account_id: str, reason: str
) -> None:
    """Stop sending to an endpoint (its pending deliveries wait) and tell the account why."""
    disabled = (
        await session.execute(
            update(WebhookEndpoint)
            .where(WebhookEndpoint.id == endpoint_id, WebhookEndpoint.enabled.is_(True))
            .values(enabled=False, disabled_reason=reason[:500], updated_at=utcnow())
            .returning(WebhookEndpoint.url)
            .execution_options(synchronize_session=False)
        )
    ).first()
    if disabled is not None:
        account_events.add(
            session,
            account_id=account_id,
            kind="webhook_endpoint_disabled",
            message=f"Webhook endpoint {endpoint_id} ({disabled.url}) was disabled: {reason}. "
            "Fix the receiver, then enable it again; waiting deliveries resume.",
        )
