"""How the service shows an order and the latest offers: what the API returns and, for orders,
what every webhook carries, so the two never drift apart."""

from datetime import datetime
from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, field_validator

from app.money import format_money
from app.states import DeploymentStatus, OrderStatus

MoneyOut = Annotated[Decimal, PlainSerializer(format_money, return_type=str)]


class DeploymentOut(BaseModel):
    """The machine an order got (or is getting)."""

    model_config = ConfigDict(from_attributes=True)

    provider: str
    region: str
    instance_type: str
    provider_vm_id: str | None
    price_per_hour: MoneyOut
    price_per_hour_with_fees: MoneyOut
    ip: str | None
    status: DeploymentStatus
    created_at: datetime


class OrderOut(BaseModel):
    """An order as its owner sees it."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str | None
    status: OrderStatus
    gpu_model: str
    gpu_count: int
    providers: list[str]
    # Of `providers`, those this service has no credentials for (it cannot deploy there).
    disabled_providers: list[str] = []
    max_price_per_hour: MoneyOut
    regions: list[str] | None
    min_disk_gb: int | None
    interconnect: str | None
    expires_at: datetime | None
    ssh_public_key: str | None
    created_at: datetime
    updated_at: datetime
    deployment: DeploymentOut | None = None

    @field_validator("disabled_providers", mode="before")
    @classmethod
    def _none_is_empty(cls, value: list[str] | None) -> list[str]:
        return value or []

    @classmethod
    def present(cls, order: object, deployment: object | None) -> "OrderOut":
        """The order with its latest deployment attempt, if it has one."""
        out = cls.model_validate(order)
        if deployment is not None:
            out.deployment = DeploymentOut.model_validate(deployment)
        return out


class OfferOut(BaseModel):
    """A machine a provider shows in stock now, with the price a user would pay."""

    provider: str
    region: str
    sku: str
    gpu_model: str
    gpu_count: int
    interconnect: str | None
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


class ProviderReadOut(BaseModel):
    """When a provider's stock was last read, and what went wrong with the latest try, if so."""

    provider: str
    fetched_at: datetime | None  # the last read that worked
    checked_at: datetime | None  # the last read tried
    error: str | None


class OffersOut(BaseModel):
    """The latest offers, cheapest first, and how fresh each provider's read is."""

    data: list[OfferOut]
    providers: list[ProviderReadOut]


class StockReadOut(BaseModel):
    """A provider's last stock read: when, how many offers, and what went wrong, if so."""

    checked_at: datetime | None  # the last read tried
    fetched_at: datetime | None  # the last read that worked
    offers: int  # offers in the last read that worked
    error: str | None


class BalanceReadOut(BaseModel):
    """Our account balance at a provider as last read, or why it could not be."""

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
