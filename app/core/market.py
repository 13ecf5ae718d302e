"""What offers and VMs are, what orders want, and the two in terms of each other: who may have
what, at what price. Provider-neutral and pure (no I/O, and no import of the app's layers);
the adapters speak these types, and the matcher, the waiting-order book and the offers the API
shows all decide by them.
"""

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import ROUND_UP, Decimal
from enum import StrEnum
from typing import Any, NamedTuple

from app.core.catalogue import ClusterInterconnect, Interconnect, Provider
from app.core.drivers import SERVE_MIN_DRIVER
from app.core.money import CENT, price_with_fees


class VMState(StrEnum):
    """A provider's VM status, normalized."""

    PENDING = "pending"  # accepted, not running yet
    RUNNING = "running"  # up; `ip` may still be None for a moment on some providers
    FAILED = "failed"  # will never run (provider error, capacity lost after accept)
    STOPPED = "stopped"  # exists, not running, may still bill
    SUSPENDED = "suspended"  # held by the provider (e.g. its account ran out of credit)
    DELETING = "deleting"
    GONE = "gone"  # deleted or terminated
    UNKNOWN = "unknown"  # a status we do not know: never treated as running or gone


# A VM (or a cluster's node) in one of these states will not run again: the provider ended it
# (or is ending it) by itself, or we did.
ENDED_VM_STATES = frozenset({VMState.FAILED, VMState.GONE, VMState.SUSPENDED, VMState.DELETING})


class OfferKey(NamedTuple):
    """What identifies an offer across polls, in memory and in stock history."""

    provider: str
    region: str
    sku: str

    @classmethod
    def of(cls, row: Any) -> "OfferKey":
        """The key of anything with provider, region and sku (an offer, a stored row)."""
        return cls(str(row.provider), row.region, row.sku)


MAX_NODES = 16  # machines one order may deploy together (Verda's largest Instant Cluster)
MAX_ALTERNATIVES = 8  # shapes one order may list, of which it deploys one


class MachineKey(NamedTuple):
    """What a machine is, as orders ask for it and the matcher groups offers: the GPU model, the
    GPUs per node and the nodes (1: a single machine). The node count is part of it so that a
    cluster is never taken for one of its machines."""

    gpu_model: str
    gpu_count: int  # per node
    nodes: int = 1


@dataclass(frozen=True, eq=False)
class Boots:
    """The OS images that run one offer's machine, as its provider's own lists say, best first
    (the image it is configured to boot, where that runs it; then the newest driver), each with
    its NVIDIA driver branch (None: the image does not say), and the other names a create may
    give one of them (an id). Built by the adapter from the lists the watcher reads."""

    images: tuple[tuple[str, int | None], ...]
    aliases: Mapping[str, str] = field(default_factory=dict)  # other name -> its name above
    configured: str | None = None  # what a create boots unless told otherwise
    gpu_min_driver: int | None = None  # the oldest branch the machine's GPU runs on

    def driver_of(self, image: str) -> tuple[bool, int | None]:
        """Whether `image` (by any of its names) runs this machine, and its driver branch."""
        name = self.aliases.get(image, image)
        for listed, driver in self.images:
            if listed == name:
                return True, driver
        return False, None

    def choose(self, min_driver: int | None = None) -> str | None:
        """The image a create should boot, its driver at least `min_driver` (and what the GPU
        needs, known, not guessed); None when none of them has it."""
        need = max(self.gpu_min_driver or 0, min_driver or 0)
        for name, driver in self.images:
            if not need or (driver is not None and driver >= need):
                return name
        return None

    def runs(self, image: str | None, min_driver: int | None = None) -> bool:
        """Whether a create of this machine can boot `image` (None: an image of its choosing)
        with a driver of at least `min_driver`, known."""
        if image is None:
            return self.choose(min_driver) is not None
        listed, driver = self.driver_of(image)
        if not listed:
            return False
        return min_driver is None or (driver is not None and driver >= min_driver)


@dataclass(frozen=True)
class Offer:
    """A machine (or a cluster of `nodes` machines sold as one) a provider shows as in stock
    right now, at a price for the whole of it."""

    provider: Provider
    region: str
    sku: str  # the provider's own instance type / flavor name (QuantaCloud: `<slug>-x<count>`)
    gpu_model: str  # a name from app.core.catalogue.GPU_MODELS
    gpu_count: int  # per node
    price_per_hour: Decimal  # USD, the whole offer (all its nodes), before our fees
    interconnect: Interconnect | None = None  # between the GPUs of one node
    vcpus: int | None = None
    ram_gb: int | None = None
    disk_gb: int | None = None
    disk_fixed: bool = False  # True when the disk size comes with the offer and cannot be chosen
    # USD per GB per hour of the disk we size at deploy time, billed apart from the machine
    # (Verda's OS volume); 0 when the disk comes with the machine's price.
    disk_price_per_gb_hour: Decimal = Decimal(0)
    available: int | None = None  # how many the provider says it has; None = "at least one"
    offer_id: str | None = None  # the provider's id for this offer, where it has one
    nodes: int = 1  # machines in the offer, deployed together (1: a single machine)
    # The fabric between its nodes; None for a single machine, or nodes with no fast fabric.
    cluster_interconnect: ClusterInterconnect | None = None
    # The images that run it, where its provider's image lists were read (None: not known).
    boots: Boots | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> OfferKey:
        """What identifies this offer across polls: provider, region, sku."""
        return OfferKey(str(self.provider), self.region, self.sku)

    @property
    def machine(self) -> MachineKey:
        """What machine this offer is: GPU model, GPUs per node, nodes."""
        return MachineKey(self.gpu_model, self.gpu_count, self.nodes)


FORECAST_TEXT_LIMIT = 40  # characters of a provider's forecast kept (Hyperstack's: "200+")


@dataclass(frozen=True)
class StockForecast:
    """What a provider says it plans to have of one of its GPU models in one region: its word,
    not ours. Each span is its own text (Hyperstack's buckets, "10+"); None: nothing said."""

    provider: Provider
    region: str
    provider_model: str  # the provider's own name for the GPU; the forecast is of it
    gpu_model: str  # a name from app.core.catalogue.GPU_MODELS
    interconnect: Interconnect | None
    within_7_days: str | None
    within_30_days: str | None


@dataclass(frozen=True)
class Machine:
    """One node of a VM sold as a cluster (a Verda Instant Cluster's worker), as reported."""

    id: str
    state: VMState
    provider_status: str
    name: str | None = None
    ip: str | None = None  # the node's address inside the cluster (private)


@dataclass(frozen=True)
class VM:
    """A VM as the provider reports it (or a cluster sold as one object: `ip` is then its login
    node's public address and `machines` its nodes)."""

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
    machines: tuple[Machine, ...] = field(default_factory=tuple)  # a cluster's nodes; else ()
    # Ended (GONE or DELETING), but a part of it the provider bills apart (a volume) is still
    # there: a delete sent again removes it.
    leftovers: bool = False


# What each requested interconnect accepts: SXM boards carry NVLink (NVSwitch) too.
ACCEPTED_INTERCONNECTS: dict[Interconnect, frozenset[Interconnect]] = {
    Interconnect.PCIE: frozenset({Interconnect.PCIE}),
    Interconnect.NVLINK: frozenset({Interconnect.NVLINK, Interconnect.SXM}),
    Interconnect.SXM: frozenset({Interconnect.SXM}),
}


@dataclass(frozen=True, slots=True)  # slots: the watcher keeps one per waiting order
class OrderWants:
    """The part of a waiting order the matcher looks at."""

    id: str
    created_at: datetime
    # Where it may deploy: the providers it accepts, less those that cannot run its start-up
    # script when it has one (`wants_of`), so no offer of theirs fits it.
    providers: frozenset[str]
    gpu_model: str
    gpu_count: int  # per node
    max_price_per_hour: Decimal  # the whole order (all its nodes)
    regions: frozenset[str] | None = None  # upper-cased; None = anywhere
    min_disk_gb: int | None = None
    interconnect: Interconnect | None = None
    account_id: str = ""
    nodes: int = 1
    cluster_interconnect: ClusterInterconnect | None = None  # the fabric required; None = any
    needs_startup_script: bool = False  # its machine must run a script at boot
    image: str | None = None  # the OS image it names (None: one the provider chooses)
    # The oldest NVIDIA driver its machine's image may have (its script serves a model).
    min_driver: int | None = None
    # Which of the order's alternatives this is (1: its first, or its only one), and whether
    # the order takes them strictly in the order listed rather than the cheapest.
    alternative: int = 1
    prefer_listed: bool = False
    # The order's spend limit (all its alternatives share it): its first hour, held at the
    # claim, must not pass it.
    max_total_usd: Decimal | None = None

    @property
    def machine(self) -> MachineKey:
        """What machine this order wants: GPU model, GPUs per node, nodes."""
        return MachineKey(self.gpu_model, self.gpu_count, self.nodes)

    @property
    def first_hour_cap(self) -> Decimal:
        """The most its first hour may cost, fees and a disk billed apart included: its price
        cap, or its `max_total_usd` where that is less."""
        total = self.max_total_usd
        if total is None or total >= self.max_price_per_hour:
            return self.max_price_per_hour
        return total


# The disk an order that names none gets where the disk is sized at deploy time (Verda's OS
# volume): sent explicitly, so that what is priced is what the provider bills, never a size
# the provider chooses. The size of Verda's own API examples.
DEFAULT_DISK_GB = 100


@dataclass(frozen=True)
class Fees:
    """The service's fees, applied to every provider price before comparing with an order."""

    percent: Decimal = Decimal(0)
    flat_per_hour: Decimal = Decimal(0)

    def apply(self, price: Decimal) -> Decimal:
        """The price a user pays per hour for a machine the provider sells at `price`."""
        return price_with_fees(
            price, fee_percent=self.percent, fee_flat_per_hour=self.flat_per_hour
        )


@dataclass(frozen=True)
class Abilities:
    """What each provider's creates can carry beyond the machine (`registry.abilities`): an
    order with a start-up script deploys only where one runs, one naming an image only where
    an image can be chosen."""

    script_runners: frozenset[str] = frozenset()
    image_choosers: frozenset[str] = frozenset()

    def deployable(self, providers: Collection[str], row: Any) -> frozenset[str]:
        """Those of `providers` an order row (its script and image columns) may deploy at."""
        scripted = row.startup_script_bytes is not None
        imaged = getattr(row, "image", None) is not None
        return frozenset(
            p
            for p in providers
            if (not scripted or p in self.script_runners)
            and (not imaged or p in self.image_choosers)
        )


def wants_of(row: Any, *, able: Abilities, prefer_listed: bool = False) -> OrderWants:
    """What the matcher needs of an order row (or of a row with the same columns); `able`
    leaves out the providers that cannot carry its start-up script or image."""
    scripted = row.startup_script_bytes is not None
    serves = getattr(row, "serve_engine", None) is not None
    return OrderWants(
        id=row.id,
        created_at=row.created_at,
        providers=able.deployable(row.providers, row),
        gpu_model=row.gpu_model,
        gpu_count=row.gpu_count,
        max_price_per_hour=row.max_price_per_hour,
        regions=frozenset(r.upper() for r in row.regions) if row.regions else None,
        min_disk_gb=row.min_disk_gb,
        interconnect=Interconnect(row.interconnect) if row.interconnect else None,
        account_id=row.account_id,
        nodes=row.nodes,
        cluster_interconnect=(
            ClusterInterconnect(row.cluster_interconnect) if row.cluster_interconnect else None
        ),
        needs_startup_script=scripted,
        image=getattr(row, "image", None),
        min_driver=SERVE_MIN_DRIVER if serves else None,
        prefer_listed=prefer_listed,
        max_total_usd=row.max_total_usd,
    )


def all_wants_of(row: Any, *, able: Abilities) -> tuple[OrderWants, ...]:
    """What the matcher needs of each of an order's alternatives (`row.alternatives`), in the
    order they were listed (`able`: as for `wants_of`). The first is its machine columns."""
    prefer_listed = getattr(row, "prefer", None) == "listed"
    first = wants_of(row, able=able, prefer_listed=prefer_listed)
    listed = row.alternatives
    if len(listed) == 1:  # most orders: the columns say it all, with no JSON to read
        return (first,)
    return tuple(
        replace(
            first,
            providers=able.deployable(alt["providers"], row),
            gpu_model=alt["gpu_model"],
            gpu_count=alt["gpu_count"],
            max_price_per_hour=Decimal(alt["max_price_per_hour"]),
            regions=frozenset(r.upper() for r in alt["regions"]) if alt.get("regions") else None,
            min_disk_gb=alt.get("min_disk_gb"),
            interconnect=Interconnect(alt["interconnect"]) if alt.get("interconnect") else None,
            nodes=alt.get("nodes", 1),
            cluster_interconnect=(
                ClusterInterconnect(alt["cluster_interconnect"])
                if alt.get("cluster_interconnect")
                else None
            ),
            alternative=position,
            prefer_listed=prefer_listed,
        )
        for position, alt in enumerate(listed, start=1)
    )


def fits(order: OrderWants, offer: Offer) -> bool:
    """Whether `offer` satisfies every constraint of `order` except the price."""
    # A provider that cannot run the order's start-up script is not among its `providers`.
    if str(offer.provider) not in order.providers:
        return False
    if (
        offer.gpu_model != order.gpu_model
        or offer.gpu_count != order.gpu_count
        or offer.nodes != order.nodes  # a cluster is never taken for one of its machines
    ):
        return False
    if (
        order.cluster_interconnect is not None
        and offer.cluster_interconnect != order.cluster_interconnect
    ):
        return False
    if order.regions is not None and offer.region.upper() not in order.regions:
        return False
    disk_too_small = offer.disk_gb is None or (
        order.min_disk_gb is not None and offer.disk_gb < order.min_disk_gb
    )
    if order.min_disk_gb is not None and offer.disk_fixed and disk_too_small:
        return False
    if order.interconnect is not None:
        accepted = ACCEPTED_INTERCONNECTS[order.interconnect]
        if offer.interconnect is None or offer.interconnect not in accepted:
            return False
    return bootable(order, offer)


def bootable(order: OrderWants, offer: Offer) -> bool:
    """Whether `offer`'s machine boots an image `order` can use: the one it names, and one with
    the driver its script needs. Where the offer's images are not known, a named image is left
    to the create to check, but a driver needed is never guessed."""
    if offer.boots is None:
        return order.min_driver is None
    return offer.boots.runs(order.image, order.min_driver)


def matches(order: OrderWants, offer: Offer, offer_price_with_fees: Decimal) -> bool:
    """Whether `offer` satisfies every constraint of `order`, price (and spend limit) included."""
    return offer_price_with_fees <= order.first_hour_cap and fits(order, offer)


def disk_size_gb(min_disk_gb: int | None) -> int:
    """The disk sent where it is sized at deploy time: the order's, or DEFAULT_DISK_GB."""
    return DEFAULT_DISK_GB if min_disk_gb is None else min_disk_gb


def disk_price_per_hour(order: OrderWants, offer: Offer) -> Decimal:
    """What the disk `order` gets at `offer` costs per hour on top of the machine, in cents.

    Rounded up, so the account never pays less than the provider bills us for it.
    """
    if offer.disk_fixed or not offer.disk_price_per_gb_hour:
        return Decimal(0)
    size = disk_size_gb(order.min_disk_gb)
    return (size * offer.disk_price_per_gb_hour).quantize(CENT, rounding=ROUND_UP)
