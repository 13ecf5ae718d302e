"""What the operator sees of each provider: its last stock read, our balance there, and the
creates sent to it in the last hour."""

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.providers.registry import display_name, offered_providers
from app.storage.models import Attempt, OfferSnapshot, ProviderBalance


async def keep_balance(
    session: AsyncSession,
    *,
    provider: str,
    amount: Decimal | None,
    read_at: datetime,
    error: str | None,
) -> None:
    """Keep a provider's latest balance read (the amount, or why there is none)."""
    await session.merge(
        ProviderBalance(provider=provider, amount=amount, read_at=read_at, error=error)
    )


@dataclass(frozen=True)
class ProviderStatus:
    """One offered provider as the watcher last saw it: its last stock read and our balance
    there (None: never read), and the creates sent to it in the last hour."""

    provider: str
    name: str
    enabled: bool  # this service has credentials for it
    stock: OfferSnapshot | None
    balance: ProviderBalance | None
    creates_last_hour: int


async def report(
    session: AsyncSession, *, now: datetime, enabled: Collection[str]
) -> list[ProviderStatus]:
    """Every offered provider, configured or not, as the watcher last saw it."""
    snapshots = {s.provider: s for s in (await session.scalars(select(OfferSnapshot)))}
    balances = {b.provider: b for b in (await session.scalars(select(ProviderBalance)))}
    counted = await session.execute(
        select(Attempt.provider, func.count())
        .where(Attempt.created_at >= now - timedelta(hours=1))
        .group_by(Attempt.provider)
    )
    creates = {str(row[0]): int(row[1]) for row in counted}
    return [
        ProviderStatus(
            provider=str(provider),
            name=display_name(provider),
            enabled=str(provider) in enabled,
            stock=snapshots.get(str(provider)),
            balance=balances.get(str(provider)),
            creates_last_hour=creates.get(str(provider), 0),
        )
        for provider in offered_providers()
    ]
