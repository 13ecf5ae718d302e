"""The latest offers each provider showed, as kept by the watcher."""

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.catalogue import ClusterInterconnect, Interconnect, Provider
from app.core.clock import utcnow
from app.core.market import (
    Fees,
    Offer,
    OrderWants,
    all_wants_of,
    disk_price_per_hour,
    matches,
)
from app.core.money import format_money
from app.core.states import OrderStatus
from app.providers.registry import abilities
from app.storage.models import OfferSnapshot, Order


def offer_json(offer: Any) -> dict[str, Any]:
    """An Offer as stored JSON (money as strings; not the images it boots, which the watcher
    keeps apart: `provider_images`)."""
    data = {f.name: getattr(offer, f.name) for f in dataclasses.fields(offer) if f.name != "boots"}
    data["provider"] = str(offer.provider)
    data["interconnect"] = str(offer.interconnect) if offer.interconnect else None
    fabric = offer.cluster_interconnect
    data["cluster_interconnect"] = str(fabric) if fabric else None
    data["price_per_hour"] = format_money(offer.price_per_hour)
    data["disk_price_per_gb_hour"] = str(offer.disk_price_per_gb_hour)  # exact: a GB-hour is tiny
    return data


def offer_from_json(data: dict[str, Any]) -> Offer:
    """The Offer a stored snapshot entry was made from (one kept before offers had nodes is a
    single machine)."""
    fabric = data.get("cluster_interconnect")
    return Offer(
        **{
            **data,
            "provider": Provider(data["provider"]),
            "interconnect": Interconnect(data["interconnect"]) if data["interconnect"] else None,
            "cluster_interconnect": ClusterInterconnect(fabric) if fabric else None,
            "price_per_hour": Decimal(data["price_per_hour"]),
            # snapshots kept before disks were priced have none
            "disk_price_per_gb_hour": Decimal(data.get("disk_price_per_gb_hour", "0")),
        }
    )


async def keep_snapshot(
    session: AsyncSession,
    *,
    provider: str,
    offers: list[dict[str, Any]],
    fetched_at: datetime | None,
    error: str | None,
    rate_limit_remaining: int | None = None,
) -> None:
    """Keep a provider's latest read (offers as `offer_json` gives them) for every replica."""
    await session.merge(
        OfferSnapshot(
            provider=provider,
            offers=offers,
            fetched_at=fetched_at,
            checked_at=utcnow(),
            error=error,
            rate_limit_remaining=rate_limit_remaining,
        )
    )


async def _waiting_orders(session: AsyncSession, account_id: str) -> list[OrderWants]:
    rows = await session.execute(
        select(Order)
        .where(Order.account_id == account_id, Order.status == OrderStatus.WAITING)
        .order_by(Order.created_at, Order.id)
    )
    able = abilities()
    return [wants for order in rows.scalars() for wants in all_wants_of(order, able=able)]


@dataclass(frozen=True)
class ShownOffer:
    """An offer of a provider's latest read, priced for a user, with the account's waiting
    orders it would satisfy (oldest first)."""

    offer: Offer
    price_per_hour_with_fees: Decimal
    matching_orders: tuple[str, ...]


@dataclass(frozen=True)
class LatestOffers:
    """The offers of each provider's latest read, cheapest first, and those reads."""

    offers: list[ShownOffer]
    reads: list[OfferSnapshot]


async def latest_offers(
    session: AsyncSession,
    *,
    fees: Fees,
    account_id: str,
    gpu_model: str | None = None,
    gpu_count: int | None = None,
    nodes: int | None = None,
    provider: str | None = None,
) -> LatestOffers:
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
            if nodes is not None and raw.get("nodes", 1) != nodes:
                continue
            offer = offer_from_json(raw)
            with_fees = fees.apply(offer.price_per_hour)
            matching = (
                o.id
                for o in waiting
                if matches(o, offer, with_fees + disk_price_per_hour(o, offer))
            )
            offers.append(ShownOffer(offer, with_fees, tuple(dict.fromkeys(matching))))
    offers.sort(
        key=lambda o: (o.price_per_hour_with_fees, o.offer.provider, o.offer.region, o.offer.sku)
    )
    return LatestOffers(offers=offers, reads=snapshots)
