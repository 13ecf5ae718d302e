"""The one interface every provider adapter implements, and the types it speaks in.

Adapters turn each provider's wire format into these types and each provider's failures into
the typed outcomes below, keyed on HTTP status and error code, never on message text.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Protocol

from app.catalogue import Interconnect, Provider
from app.text import storable

# How far a provider's clock (its VMs' creation times) may be from ours.
PROVIDER_CLOCK_SKEW = timedelta(seconds=60)


class VMState(StrEnum):
    """A provider's VM status, normalized."""

    PENDING = "pending"  # accepted, not running yet
    RUNNING = "running"  # up; `ip` may still be None for a moment on some providers
    FAILED = "failed"  # will never run (provider error, capacity lost after accept)
    STOPPED = "stopped"  # exists, not running, may still bill
    DELETING = "deleting"
    GONE = "gone"  # deleted or terminated
    UNKNOWN = "unknown"  # a status we do not know: never treated as running or gone


@dataclass(frozen=True)
class Offer:
    """A machine a provider shows as in stock right now, at a price for the whole machine."""

    provider: Provider
    region: str
    sku: str  # the provider's own instance type / flavor name (QuantaCloud: `<slug>-x<count>`)
    gpu_model: str  # a name from app.catalogue.GPU_MODELS
    gpu_count: int
    price_per_hour: Decimal  # USD, whole machine, before our fees
    interconnect: Interconnect | None = None
    vcpus: int | None = None
    ram_gb: int | None = None
    disk_gb: int | None = None
    disk_fixed: bool = False  # True when the disk size comes with the offer and cannot be chosen
    available: int | None = None  # how many the provider says it has; None = "at least one"
    offer_id: str | None = None  # the provider's id for this offer, where it has one

    @property
    def key(self) -> tuple[str, str, str]:
        """What identifies this offer across polls: provider, region, sku."""
        return (str(self.provider), self.region, self.sku)


@dataclass(frozen=True)
class VM:
    """A VM as the provider reports it."""

    provider: Provider
    id: str
    state: VMState
    provider_status: str  # the provider's own word for it, for people and logs
    name: str | None = None
    region: str | None = None
    sku: str | None = None
    ip: str | None = None
    created_at: datetime | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)


class ProviderError(Exception):
    """Base of every typed outcome; carries the provider and, where there was one, the status."""

    def __init__(self, provider: Provider, message: str, *, status_code: int | None = None) -> None:
        message = storable(message)  # it may quote the provider, and it goes to the database
        super().__init__(f"{provider.display_name}: {message}")
        self.provider = provider
        self.message = message
        self.status_code = status_code


class NoCapacity(ProviderError):
    """The provider has no machine of this kind right now (someone else got it first)."""

    def __init__(
        self,
        provider: Provider,
        message: str,
        *,
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(provider, message, status_code=status_code)
        self.retry_after = retry_after


class ProviderOutOfFunds(ProviderError):
    """Our account at the provider cannot pay for this machine."""


class RateLimited(ProviderError):
    """Too many requests; wait `retry_after` seconds (None: the provider did not say)."""

    def __init__(
        self,
        provider: Provider,
        message: str,
        *,
        status_code: int | None = 429,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(provider, message, status_code=status_code)
        self.retry_after = retry_after


class AuthFailed(ProviderError):
    """Our credentials were refused (after one refresh where the provider has tokens)."""


class Rejected(ProviderError):
    """The request itself is wrong; sending it again will not help."""


class Unavailable(ProviderError):
    """A read failed for a reason that may pass (5xx, timeout, dropped connection, bad JSON)."""


class OutcomeUnknown(ProviderError):
    """A create got no clear answer (timeout, dropped connection, 5xx): the VM may exist."""


class ProviderAdapter(Protocol):
    """What the service needs from a GPU cloud."""

    provider: Provider

    async def fetch_offers(self) -> list[Offer]:
        """Every machine in stock now, normalized; unknown GPUs and unpriced ones are left out."""
        ...

    async def create_vm(
        self,
        offer: Offer,
        *,
        name: str,
        tag: str,
        ssh_public_key: str | None,
        disk_gb: int | None = None,
    ) -> VM:
        """Create one plain VM from `offer`, named `name` and tagged `tag` where possible.

        `disk_gb` sizes the OS disk where the provider lets us choose it (`offer.disk_fixed`
        false); fixed-disk offers ignore it.

        Raises `Unavailable` (not `OutcomeUnknown`) when a call needed before the create
        itself failed: nothing was sent, so no VM can exist.
        """
        ...

    async def get_vm(self, vm_id: str) -> VM | None:
        """The VM with this id, or None when the provider says it does not exist."""
        ...

    async def find_vms(
        self, *, name: str, tag: str, offer: Offer, not_before: datetime
    ) -> list[VM]:
        """VMs that may be the result of a create sent with `name`/`tag` at or after `not_before`.

        Providers with names or tags match on them exactly; QuantaCloud, which has neither,
        returns its deployments of this offer's kind created at or after `not_before`.
        """
        ...

    async def list_vms(self) -> list[VM]:
        """Every VM on our account that may be ours (tagged by us where the provider has tags).

        Used to find VMs the service made but no order owns.
        """
        ...

    async def delete_vm(self, vm_id: str) -> None:
        """Delete a VM; a VM that is already gone is not an error."""
        ...

    async def balance(self) -> Decimal:
        """Our account's balance at the provider, in USD."""
        ...
