"""What the operator sees of each provider: its last stock read, our balance there, and the
creates sent to it in the last hour."""

from collections.abc import Collection
from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.providers.registry import display_name, offered_providers
from app.services.views import BalanceReadOut, ProviderStatusOut, StockReadOut
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


async def report(
    session: AsyncSession, *, now: datetime, enabled: Collection[str]
) -> list[ProviderStatusOut]:
    """Every offered provider, configured or not, as the watcher last saw it."""
    snapshots = {s.provider: s for s in (await session.scalars(select(OfferSnapshot)))}
    balances = {b.provider: b for b in (await session.scalars(select(ProviderBalance)))}
    counted = await session.execute(
        select(Attempt.provider, func.count())
        .where(Attempt.created_at >= now - timedelta(hours=1))
        .group_by(Attempt.provider)
    )
    creates = {str(row[0]): int(row[1]) for row in counted}
    result = []
    for provider in offered_providers():
        name = str(provider)
        snapshot, balance = snapshots.get(name), balances.get(name)
        result.append(
            ProviderStatusOut(
                provider=name,
                name=display_name(provider),
                enabled=name in enabled,
                stock=None
                if snapshot is None
                else StockReadOut(
                    checked_at=snapshot.checked_at,
                    fetched_at=snapshot.fetched_at,
                    offers=len(snapshot.offers or []),
                    error=snapshot.error,
                ),
                balance=None
                if balance is None
                else BalanceReadOut(
                    amount=balance.amount, read_at=balance.read_at, error=balance.error
                ),
                rate_limit_remaining=None if snapshot is None else snapshot.rate_limit_remaining,
                creates_last_hour=creates.get(name, 0),
            )
        )
    return result
