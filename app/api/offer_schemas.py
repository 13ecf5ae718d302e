"""Bodies of the offers endpoint and the admin's provider report: the latest offers with the
waiting orders each would satisfy, and each provider as the watcher last read it."""

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from app.services.offers import LatestOffers, ShownOffer, offer_json
from app.services.order_payload import MoneyOut
from app.services.provider_status import ProviderStatus


class OfferOut(BaseModel):
    """A machine (or a cluster of `nodes` machines sold as one) a provider shows in stock now,
    with the price a user would pay for all of it."""

    provider: str
    region: str
    sku: str
    gpu_model: str
    gpu_count: int  # per node
    nodes: int  # machines in the offer, deployed together (1: a single machine)
    interconnect: str | None  # between the GPUs of one node
    cluster_interconnect: str | None  # between the nodes; null for a single machine
    vcpus: int | None
    ram_gb: int | None
    disk_gb: int | None
    disk_fixed: bool
    available: int | None  # None: the provider only says "in stock"
    price_per_hour: MoneyOut
    price_per_hour_with_fees: MoneyOut
    matching_orders: list[str] = Field(
        default_factory=list,
        description="Your waiting orders this offer satisfies (price included), oldest first.",
    )

    @classmethod
    def present(cls, shown: ShownOffer) -> "OfferOut":
        """An offer as its snapshot keeps it, priced for the user, with their orders it fits."""
        return cls.model_validate(
            {
                **offer_json(shown.offer),
                "price_per_hour_with_fees": shown.price_per_hour_with_fees,
                "matching_orders": list(shown.matching_orders),
            }
        )


class ProviderReadOut(BaseModel):
    """When a provider's stock was last read, and what went wrong with the latest try, if so."""

    model_config = ConfigDict(from_attributes=True)

    provider: str
    fetched_at: datetime | None  # the last read that worked
    checked_at: datetime | None  # the last read tried
    error: str | None


class OffersOut(BaseModel):
    """The latest offers, cheapest first, and how fresh each provider's read is."""

    data: list[OfferOut]
    providers: list[ProviderReadOut]

    @classmethod
    def present(cls, latest: LatestOffers) -> "OffersOut":
        return cls(
            data=[OfferOut.present(shown) for shown in latest.offers],
            providers=[ProviderReadOut.model_validate(read) for read in latest.reads],
        )


class StockReadOut(BaseModel):
    """A provider's last stock read: when, how many offers, and what went wrong, if so."""

    checked_at: datetime | None  # the last read tried
    fetched_at: datetime | None  # the last read that worked
    offers: int  # offers in the last read that worked
    error: str | None


class BalanceReadOut(BaseModel):
    """Our account balance at a provider as last read, or why it could not be."""

    model_config = ConfigDict(from_attributes=True)

    amount: MoneyOut | None
    read_at: datetime
    error: str | None


class ProviderStatusOut(BaseModel):
    """One provider as the operator sees it (admin only)."""

    provider: str
    name: str
    enabled: bool  # this service has credentials for it
    stock: StockReadOut | None  # None: never read
    balance: BalanceReadOut | None  # None: never read
    # Requests left in the tightest bucket its stock reads count in, as the provider reports
    # it where it does, else as counted (None: not read yet)
    rate_limit_remaining: int | None
    creates_last_hour: int

    @classmethod
    def present(cls, status: ProviderStatus) -> "ProviderStatusOut":
        snapshot, balance = status.stock, status.balance
        return cls(
            provider=status.provider,
            name=status.name,
            enabled=status.enabled,
            stock=None
            if snapshot is None
            else StockReadOut(
                checked_at=snapshot.checked_at,
                fetched_at=snapshot.fetched_at,
                offers=len(snapshot.offers or []),
                error=snapshot.error,
            ),
            balance=None if balance is None else BalanceReadOut.model_validate(balance),
            rate_limit_remaining=None if snapshot is None else snapshot.rate_limit_remaining,
            creates_last_hour=status.creates_last_hour,
        )
