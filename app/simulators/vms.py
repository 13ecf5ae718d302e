"""The machines a simulated provider sells: catalogue entries, stock, and VMs on a boot clock."""

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar

from app.simulators.volumes import SimVolume

DEFAULT_BOOT_SECONDS = 3.0


@dataclass(frozen=True)
class CatalogEntry:
    """One kind of machine in one region, with the provider-specific naming in `details`.

    A cluster kind (Verda's Instant Clusters) is sold as one object of `nodes` machines:
    `gpu_count`, `vcpus` and `ram_gb` are then the whole cluster's."""

    sku: str
    region: str
    gpu_model: str
    gpu_count: int
    price_per_hour: Decimal
    vcpus: int
    ram_gb: int
    disk_gb: int
    interconnect: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    nodes: int = 1

    @property
    def key(self) -> tuple[str, str]:
        """(sku, region)."""
        return (self.sku, self.region)

    @property
    def gpus_per_node(self) -> int:
        """How many GPUs each of its nodes has."""
        return self.gpu_count // self.nodes


@dataclass
class SimVM:
    """A VM the simulator made; its status follows from the time since it was created."""

    id: str
    entry: CatalogEntry
    name: str | None
    tags: list[str]
    created_at: float  # Unix seconds
    started: float  # simulator clock seconds
    ip: str
    fail_after_accept: bool = False
    deleted: float | None = None  # simulator clock seconds when a delete was accepted
    ended: float | None = None  # simulator clock seconds when the provider ended it by itself
    details: dict[str, Any] = field(default_factory=dict)
    charged: Decimal = Decimal(0)  # what has been taken from the balance for it so far
    price_per_hour: Decimal | None = None  # what it bills at, when not its catalogue price

    @property
    def stopped_billing(self) -> float | None:
        """When it stopped billing (a delete accepted, or the provider ended it), if it has."""
        ends = [t for t in (self.deleted, self.ended) if t is not None]
        return min(ends) if ends else None

    @property
    def hourly_price(self) -> Decimal:
        """The price it bills at per hour."""
        return self.entry.price_per_hour if self.price_per_hour is None else self.price_per_hour


@dataclass
class CreateRecord:
    """One create request as the simulator received it, and what became of it."""

    received_at: float
    sku: str | None
    region: str | None
    name: str | None
    outcome: str
    vm_id: str | None = None
    kind: str = "instance"  # or "cluster" (Verda's Instant Clusters)
    # The start-up script the VM got, as the provider received it (null: none).
    startup_script: str | None = None
    image: str | None = None  # the image the create named, as received (null: none)


class Fleet:
    """A provider's catalogue, stock, VMs and log of creates; each provider names the statuses."""

    catalog_entries: ClassVar[tuple[CatalogEntry, ...]]
    # Kinds sold as one object of several nodes (Verda's clusters): stocked like the others,
    # never made as VMs (`catalog` holds the VM kinds only, `cluster_catalog` these).
    cluster_entries: ClassVar[tuple[CatalogEntry, ...]] = ()
    ended_status: ClassVar[str]  # the provider's word for a VM it ended by itself

    def __init__(self) -> None:
        # The clock VMs boot, bill and get deleted on (seconds). Tests swap in one they advance;
        # a reset keeps it. Tokens, rate limits and cool-downs stay on the real monotonic clock.
        self.clock: Callable[[], float] = time.monotonic
        self.reset()

    def reset(self) -> None:
        """No stock, no VMs, no creates, the default boot time."""
        self.catalog: dict[tuple[str, str], CatalogEntry] = {e.key: e for e in self.catalog_entries}
        self.cluster_catalog: dict[tuple[str, str], CatalogEntry] = {
            e.key: e for e in self.cluster_entries
        }
        self.stock: dict[tuple[str, str], int] = dict.fromkeys(
            [*self.catalog, *self.cluster_catalog], 0
        )
        self.stock_changed_at: dict[tuple[str, str], float] = {}
        self.vms: dict[str, SimVM] = {}
        self.volumes: dict[str, SimVolume] = {}  # kept apart from VMs (Verda's)
        self.creates: list[CreateRecord] = []
        self.boot_seconds = DEFAULT_BOOT_SECONDS
        self._ips = (f"203.0.113.{n}" for n in itertools.cycle(range(1, 255)))

    # --- stock -----------------------------------------------------------------------------

    def kind(self, sku: str, region: str) -> CatalogEntry | None:
        """The kind of machine (or cluster) sold as `sku` in `region`, if there is one."""
        return self.catalog.get((sku, region)) or self.cluster_catalog.get((sku, region))

    def set_stock(self, sku: str, region: str, quantity: int) -> float:
        """Put `quantity` machines (or clusters) of this kind in stock; returns when (Unix
        seconds)."""
        entry = self.kind(sku, region)
        if entry is None:
            raise KeyError((sku, region))
        now = time.time()
        self.stock[entry.key] = quantity
        self.stock_changed_at[entry.key] = now
        self.on_stock_change(entry, quantity)
        return now

    def on_stock_change(self, entry: CatalogEntry, quantity: int) -> None:
        """Hook for providers whose offers change identity with stock (QuantaCloud)."""

    def in_stock(self, entry: CatalogEntry) -> int:
        """How many of this kind are in stock."""
        return self.stock.get(entry.key, 0)

    def take_one(self, entry: CatalogEntry) -> bool:
        """Take one machine of this kind out of stock; False when there is none."""
        if self.stock.get(entry.key, 0) <= 0:
            return False
        self.stock[entry.key] -= 1
        return True

    # --- VMs -------------------------------------------------------------------------------

    def new_vm(
        self, vm_id: str, entry: CatalogEntry, *, name: str | None, tags: list[str]
    ) -> SimVM:
        """Make a VM that starts booting now."""
        vm = SimVM(
            id=vm_id,
            entry=entry,
            name=name,
            tags=tags,
            created_at=time.time(),
            started=self.clock(),
            ip=self.next_ip(),
        )
        self.vms[vm_id] = vm
        return vm

    def next_ip(self) -> str:
        """A public address for the next machine made (TEST-NET-3, reused after 254)."""
        return next(self._ips)

    def progress(self, vm: SimVM) -> float:
        """How far through booting the VM is: 0 at create, 1 when it runs."""
        if self.boot_seconds <= 0:
            return float("inf")
        return (self.clock() - vm.started) / self.boot_seconds

    def end_vm(self, vm: SimVM) -> None:
        """The provider ends the VM by itself (discontinued, suspended, interrupted): it shows
        `ended_status` from now on."""
        if vm.ended is None:
            vm.ended = self.clock()

    def deletion_progress(self, vm: SimVM) -> float | None:
        """How far through deleting (1 = gone), or None if no delete was asked for."""
        if vm.deleted is None:
            return None
        span = max(self.boot_seconds * 0.2, 0.0)
        return float("inf") if span == 0 else (self.clock() - vm.deleted) / span

    def vm_status(self, vm: SimVM) -> str:
        """The provider's own word for the VM's status now."""
        raise NotImplementedError

    def describe_vm(self, vm: SimVM) -> dict[str, Any]:
        """A VM for the control API."""
        return {
            "id": vm.id,
            "name": vm.name,
            "tags": vm.tags,
            "sku": vm.entry.sku,
            "region": vm.entry.region,
            "status": self.vm_status(vm),
            "ip": vm.ip,
            "created_at": vm.created_at,
            "price_per_hour": str(vm.hourly_price),
            "charged": str(vm.charged),
        }

    # --- creates ---------------------------------------------------------------------------

    def record_create(
        self,
        *,
        sku: str | None,
        region: str | None,
        name: str | None,
        outcome: str,
        vm_id: str | None = None,
        kind: str = "instance",
        startup_script: str | None = None,
        image: str | None = None,
    ) -> CreateRecord:
        """Log a create request and its outcome for the control API."""
        record = CreateRecord(
            time.time(), sku, region, name, outcome, vm_id, kind, startup_script, image
        )
        self.creates.append(record)
        return record
