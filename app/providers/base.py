"""The one interface every provider adapter implements, and the types it speaks in.

Adapters turn each provider's wire format into these types and each provider's failures into
the typed outcomes below, keyed on HTTP status and error code, never on message text.
"""

from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Protocol

from app.core.catalogue import Provider
from app.core.drivers import gpu_min_driver
from app.core.market import VM, Boots, Machine, MachineKey, Offer, StockForecast, VMState
from app.core.text import storable
from app.providers.budget import Budget, StockRead

# Re-exported: adapters speak them; app.core.market is their home.
__all__ = ["VM", "Boots", "Machine", "MachineKey", "Offer", "StockForecast", "VMState"]

SAID_LIMIT = 1000  # of a provider's message kept on a `Refused`: it goes to people, bounded

# How far a provider's clock (its VMs' creation times) may be from ours.
PROVIDER_CLOCK_SKEW = timedelta(seconds=60)

_URGENT: ContextVar[bool] = ContextVar("urgent", default=False)


@contextmanager
def urgent() -> Iterator[None]:
    """Within: the requests a create or a delete needs (a delete stops a machine costing money;
    a create's look-ups, such as Hyperstack's environment, are part of it). They are never held
    back to keep the rate limit for stock reads, only at the limit itself."""
    token = _URGENT.set(True)
    try:
        yield
    finally:
        _URGENT.reset(token)


def is_urgent() -> bool:
    """Whether the current task is inside `urgent()`."""
    return _URGENT.get()


class ProviderError(Exception):
    """Base of every typed outcome; carries the provider and, where there was one, the status."""

    def __init__(self, provider: Provider, message: str, *, status_code: int | None = None) -> None:
        message = storable(message)  # it may quote the provider, and it goes to the database
        super().__init__(f"{provider}: {message}")  # `registry.described` names it for people
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


class HeldBack(RateLimited):
    """Our own rate-limit budget kept the request back: nothing was sent."""

    def __init__(self, provider: Provider, message: str, *, retry_after: float) -> None:
        super().__init__(provider, message, status_code=None, retry_after=retry_after)


class AuthFailed(ProviderError):
    """Our credentials were refused (after one refresh where the provider has tokens)."""


class Rejected(ProviderError):
    """The request itself is wrong; sending it again will not help. On a create: only a refusal
    that names the request itself (`refusals.create_refusal`), which fails the order."""


class Refused(ProviderError):
    """The provider refused a create and nothing was made, but its answer does not say what
    in the request was wrong (a quota, a stock race it words its own way, a rule we do not
    know): the order keeps waiting and that offer cools down, longer each time."""

    def __init__(
        self,
        provider: Provider,
        message: str,
        *,
        status_code: int | None = None,
        reason: str | None = None,
        said: str | None = None,
    ) -> None:
        super().__init__(provider, message, status_code=status_code)
        self.reason = reason  # the provider's error code, if it gave one
        self.said = None if said is None else storable(said[:SAID_LIMIT])  # its message


class Unavailable(ProviderError):
    """A read failed for a reason that may pass (5xx, timeout, dropped connection, bad JSON)."""


class OutcomeUnknown(ProviderError):
    """A create got no clear answer (timeout, dropped connection, 5xx): the VM may exist."""


@dataclass(frozen=True)
class Image:
    """One OS image a provider's creates may name: the name a create sends, the others it takes
    for it (an id), its NVIDIA driver branch as the image's own data says (None: it does not),
    whether it boots clusters (kept apart where the provider keeps them apart) and whether it
    is the provider's own default."""

    name: str
    driver: int | None = None
    aliases: frozenset[str] = frozenset()
    cluster: bool = False
    default: bool = False


@dataclass(frozen=True)
class ImageFit:
    """The images that run one machine a provider sells (its SKU, in `region` or in every
    region: None), best first, and the one its creates boot unless told otherwise."""

    sku: str
    machine: MachineKey
    images: tuple[str, ...]
    region: str | None = None
    configured: str | None = None


@dataclass(frozen=True)
class Images:
    """The OS images a provider's creates may name: each by every name a create takes (an
    image type or name, an id), for single machines and for clusters; where the provider says
    which runs which machine, `listed` (each with its driver) and `fits` (per machine)."""

    machines: frozenset[str] = frozenset()
    clusters: frozenset[str] = frozenset()
    listed: tuple[Image, ...] = ()
    fits: tuple[ImageFit, ...] = ()

    @classmethod
    def of(cls, listed: Iterable[Image], fits: Iterable[ImageFit] = ()) -> "Images":
        """The lists of `listed` images, and what runs where."""
        images = tuple(listed)
        return cls(
            machines=frozenset(n for i in images if not i.cluster for n in (i.name, *i.aliases)),
            clusters=frozenset(n for i in images if i.cluster for n in (i.name, *i.aliases)),
            listed=images,
            fits=tuple(fits),
        )

    def lists(self, image: str, *, cluster: bool) -> bool:
        """Whether `image` boots a machine (or a cluster's nodes, with `cluster`) here."""
        return image in (self.clusters if cluster else self.machines)

    def image(self, name: str) -> Image | None:
        """The listed image a create may call `name` (by its name or another), if listed."""
        return next((i for i in self.listed if name == i.name or name in i.aliases), None)

    def boots(self, fit: ImageFit) -> Boots:
        """What an offer of `fit`'s machine boots, for the matcher and the claim."""
        drivers = {image.name: image.driver for image in self.listed}
        return Boots(
            images=tuple((name, drivers.get(name)) for name in fit.images),
            aliases={alias: i.name for i in self.listed for alias in i.aliases},
            configured=fit.configured,
            gpu_min_driver=gpu_min_driver(fit.machine.gpu_model),
        )


def ranked(fitting: Iterable[Image], *, gpu_model: str, configured: str | None) -> tuple[str, ...]:
    """The names of those of `fitting` (what a provider lists for a machine) that can drive
    `gpu_model`, best first: `configured`, then the newest driver, the provider's default, the
    name. One whose driver is known to be too old for the GPU is left out; one whose driver is
    not known stays, last (an order may name it; nothing chooses it where a driver is needed)."""
    need = gpu_min_driver(gpu_model)
    kept = [i for i in fitting if need is None or i.driver is None or i.driver >= need]

    def rank(image: Image) -> tuple[bool, bool, int, bool, str]:
        named = configured is not None and configured in (image.name, *image.aliases)
        driver = image.driver
        return (not named, driver is None, -(driver or 0), not image.default, image.name)

    return tuple(image.name for image in sorted(kept, key=rank))


@dataclass(frozen=True)
class Volume:
    """A storage volume a provider keeps and bills apart from machines (Verda's OS and shared
    volumes): `status` is `attached`, `detached` or `trash` (deleted, not yet for good);
    `owner` is the VM name or tag it was made for, where it carries ours."""

    id: str
    name: str | None
    status: str
    owner: str | None = None


class ProviderAdapter(Protocol):
    """What the service needs from a GPU cloud."""

    provider: Provider
    budget: Budget  # the provider's rate limits and what was sent against them

    def stock_reads(self, machines: Collection[MachineKey]) -> list[StockRead]:
        """The stock reads that could go next while orders wait for `machines` (Verda can read
        one instance type's stock besides the full list); the poller waits for the soonest."""
        ...

    async def fetch_offers(self, machines: Collection[MachineKey] | None = None) -> list[Offer]:
        """Every machine in stock now, normalized; unknown GPUs and unpriced ones are left out.

        With `machines`, the read the budget lets go soonest of `stock_reads(machines)`; what it
        did not read again is as the last full read found it.
        """
        ...

    def stock_forecasts(self) -> list[StockForecast] | None:
        """What the provider said in the last `fetch_offers` it plans to have, per region and
        GPU model (Hyperstack's `planned_*`), with no request of its own; None where the
        provider says nothing of the kind, or that read did not tell."""
        ...

    async def create_vm(
        self,
        offer: Offer,
        *,
        name: str,
        tag: str,
        ssh_public_key: str | None,
        disk_gb: int | None = None,
        startup_script: str | None = None,
        image: str | None = None,
    ) -> VM:
        """Create one plain VM from `offer`, named `name` and tagged `tag` where possible.

        `disk_gb` sizes the OS disk where the provider lets us choose it (`offer.disk_fixed`
        false); fixed-disk offers ignore it. `startup_script` runs once when it boots (each
        node of a cluster); a provider whose spec does not say `runs_startup_scripts` refuses
        one (`Rejected`) rather than make a VM without it. `image` replaces the configured
        image where the spec says `chooses_image` (elsewhere a create with one is `Rejected`).

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

    async def images(self) -> Images:
        """The images its creates may name (none where the spec does not say `chooses_image`)."""
        ...

    async def delete_startup_script(self, name: str) -> None:
        """Delete the start-up script kept for the VM named `name`, where the provider keeps
        scripts apart from VMs (Verda) and this adapter knows of one; elsewhere nothing."""
        ...

    async def list_startup_scripts(self) -> list[str]:
        """The names of the start-up scripts kept on the account (none where a script goes
        with the create)."""
        ...

    async def list_volumes(self) -> list[Volume]:
        """The volumes of ours the provider keeps apart from machines, in the trash too (none
        where a machine's disks go with it)."""
        ...

    async def delete_volume(self, volume_id: str) -> None:
        """Delete a volume for good (not into a trash); one already gone is not an error."""
        ...


async def delete_urgently(adapter: ProviderAdapter, vm_id: str) -> None:
    """`adapter.delete_vm` inside `urgent()`: how the watcher deletes a machine, so that no
    delete is held back for stock reads while it costs money."""
    with urgent():
        await adapter.delete_vm(vm_id)
