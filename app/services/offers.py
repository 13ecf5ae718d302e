"""The latest offers each provider showed, as kept by the watcher."""

from decimal import Decimal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import OfferSnapshot, Order
from app.schemas import OfferOut, OffersOut, ProviderReadOut
from app.states import OrderStatus
from app.watcher.match import Fees, OrderWants, matches
from app.watcher.snapshots import offer_from_json
from app.watcher.waiting import wants_of


async def _waiting_orders(session: AsyncSession, account_id: str) -> list[OrderWants]:
    rows = await session.execute(
        select(Order)
        .where(Order.account_id == account_id, Order.status == OrderStatus.WAITING)
        .order_by(Order.created_at, Order.id)
    )
    return [wants_of(order) for order in rows.scalars()]


async def latest_offers(
    session: AsyncSession,
    *,
    fees: Fees,
    account_id: str,
    gpu_model: str | None = None,
    gpu_count: int | None = None,
    provider: str | None = None,
) -> OffersOut:
    """Every offer of the latest read of each provider, filtered, cheapest first, each with
    the account's waiting orders it would satisfy."""
    statement = select(OfferSnapshot).order_by(OfferSnapshot.provider)
    if provider is not None:
        statement = statement.where(OfferSnapshot.provider == provider)
    snapshots = list((await session.execute(statement)).scalars())
    waiting = await _waiting_orders(session, account_id)
    offers = []
    for snapshot in snapshots:
        for raw in snapshot.offers:
            if gpu_model is not None and raw["gpu_model"] != gpu_model:
                continue
            if gpu_count is not None and raw["gpu_count"] != gpu_count:
                continue
            price = Decimal(raw["price_per_hour"])
            with_fees = fees.apply(price)
            offer = offer_from_json(raw)
            offers.append(
                OfferOut.model_validate(
                    {
                        **raw,
                        "price_per_hour": price,
                        "price_per_hour_with_fees": with_fees,
                        "matching_orders": [o.id for o in waiting if matches(o, offer, with_fees)],
                    }
                )
            )
    offers.sort(key=lambda o: (o.price_per_hour_with_fees, o.provider, o.region, o.sku))
    reads = [
        ProviderReadOut(
            provider=s.provider, fetched_at=s.fetched_at, checked_at=s.checked_at, error=s.error
        )
        for s in snapshots
    ]
    return OffersOut(data=offers, providers=reads)
