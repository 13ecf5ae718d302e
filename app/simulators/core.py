"""What the three simulators share: catalogue and stock, VMs on a boot clock, a balance they
charge for the VMs they run, a log of creates and of every request, fault injection,
fixed-window rate limits, and the `/_sim` control API.

Each provider module subclasses `ProviderSimulator` with its own wire format (paths, JSON
shapes, status words, error bodies); everything here is provider-neutral.
"""

import itertools
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar

from starlette.requests import Request
from starlette.responses import Response

from app.simulators.billing import BillingPolicy, Span, charge
from app.simulators.faults import FaultQueue
from app.simulators.limits import FixedWindowLimiter
from app.simulators.network import Latency

DEFAULT_BOOT_SECONDS = 3.0
DEFAULT_BALANCE = Decimal("10000.00")
REQUEST_LOG_SIZE = 1000  # the newest requests kept: a long demo polls forever
BALANCE_PROBLEM = 'balance must be a decimal string or a number, e.g. {"balance": "123.45"}'


@dataclass(frozen=True)
class CatalogEntry:
    """One kind of machine in one region, with the provider-specific naming in `details`."""

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

    @property
    def key(self) -> tuple[str, str]:
        """(sku, region)."""
        return (self.sku, self.region)


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


@dataclass
class LoggedRequest:
    """One request a simulated API received, and when it was answered (Unix seconds)."""

    method: str
    path: str
    received_at: float
    answered_at: float | None = None
    status: int | None = None


class ProviderSimulator:
    """State and behaviour common to the simulated providers."""

    name: ClassVar[str]
    catalog_entries: ClassVar[tuple[CatalogEntry, ...]]
    billing: ClassVar[BillingPolicy] = BillingPolicy(block_seconds=1.0, refund_unused=True)
    ended_status: ClassVar[str]  # the provider's word for a VM it ended by itself

    def __init__(self) -> None:
        self.limiter = FixedWindowLimiter()
        # The clock VMs boot, bill and get deleted on (seconds). Tests swap in one they advance;
        # a reset keeps it. Tokens, rate limits and cool-downs stay on the real monotonic clock.
        self.clock: Callable[[], float] = time.monotonic
        self.rng = random.Random()
        self.reset()

    def reset(self) -> None:
        """Back to a fresh start: no stock, no VMs, no faults, default settings."""
        self.catalog: dict[tuple[str, str], CatalogEntry] = {e.key: e for e in self.catalog_entries}
        self.stock: dict[tuple[str, str], int] = dict.fromkeys(self.catalog, 0)
        self.stock_changed_at: dict[tuple[str, str], float] = {}
        self.vms: dict[str, SimVM] = {}
        self.creates: list[CreateRecord] = []
        self.requests: deque[LoggedRequest] = deque(maxlen=REQUEST_LOG_SIZE)
        self.faults = FaultQueue()
        self._balance = DEFAULT_BALANCE
        self.boot_seconds = DEFAULT_BOOT_SECONDS
        self.rate_limits = True
        self.refused_by_limits = 0  # 429s sent because a published limit was passed
        self.limiter.clear()
        # Added before every provider API answer (`latency_ms`, `jitter_ms` in the config): a
        # provider further away than the others. Bytes on the wire: `sim --latency-ms`.
        self.answer_latency = Latency(0.0)
        self._ips = (f"203.0.113.{n}" for n in itertools.cycle(range(1, 255)))

    # --- stock -----------------------------------------------------------------------------

    def set_stock(self, sku: str, region: str, quantity: int) -> float:
        """Put `quantity` machines of this kind in stock; returns when (Unix seconds)."""
        now = time.time()
        self.stock[(sku, region)] = quantity
        self.stock_changed_at[(sku, region)] = now
        self.on_stock_change(self.catalog[(sku, region)], quantity)
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
        """Make a VM that starts booting now (failing instead, if a fault says so)."""
        vm = SimVM(
            id=vm_id,
            entry=entry,
            name=name,
            tags=tags,
            created_at=time.time(),
            started=self.clock(),
            ip=next(self._ips),
            fail_after_accept=self.faults.take("fail_after_accept") is not None,
        )
        self.vms[vm_id] = vm
        return vm

    def progress(self, vm: SimVM) -> float:
        """How far through booting the VM is: 0 at create, 1 when it runs."""
        if self.boot_seconds <= 0:
            return float("inf")
        return (self.clock() - vm.started) / self.boot_seconds

    def end_vm(self, vm: SimVM) -> None:
        """The provider ends the VM by itself (discontinued, suspended, interrupted): it shows
        `ended_status` from now on and stops billing."""
        self.settle()
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

    def status_for_response(self, vm: SimVM) -> str:
        """The status to put in an API response: `vm_status`, unless `unknown_status` is queued."""
        if self.faults.take("unknown_status") is not None:
            return "reticulating_splines"  # a value no client has seen: must not crash one
        return self.vm_status(vm)

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

    # --- money -----------------------------------------------------------------------------

    @property
    def balance(self) -> Decimal:
        """Our account's balance now, after charging every VM for its time so far."""
        self.settle()
        return self._balance

    @balance.setter
    def balance(self, amount: Decimal) -> None:
        """Set the balance now: what VMs ran up before is settled, later charges come off it."""
        self.settle()
        self._balance = amount

    def settle(self) -> None:
        """Take from the balance what each VM owes by now beyond what it was charged (or give
        back what it was overcharged, where the provider refunds the unused part of a block)."""
        now = self.clock()
        for vm in self.vms.values():
            due = charge(vm.hourly_price, self.billable_span(vm), now, self.billing)
            due += self.extra_charge(vm, now)
            if due != vm.charged:
                self._balance -= due - vm.charged
                vm.charged = due

    def billable_span(self, vm: SimVM) -> Span | None:
        """When the VM bills; by default from when it runs until a delete is accepted, and
        never if it fails before it runs. Providers that bill otherwise override this."""
        if vm.fail_after_accept:
            return None
        return Span(vm.started + max(self.boot_seconds, 0.0), vm.stopped_billing)

    def extra_charge(self, vm: SimVM, now: float) -> Decimal:
        """What else the VM has cost by `now` besides its hours (none by default; Verda bills
        an OS volume a delete left behind)."""
        return Decimal(0)

    def hourly_charge(self) -> Decimal:
        """What the VMs billing now cost per hour together."""
        now = self.clock()
        spans = [(vm, self.billable_span(vm)) for vm in self.vms.values()]
        return sum(
            (
                vm.hourly_price
                for vm, span in spans
                if span is not None and span.start <= now and (span.end is None or span.end > now)
            ),
            Decimal(0),
        )

    # --- creates ---------------------------------------------------------------------------

    def record_create(
        self,
        *,
        sku: str | None,
        region: str | None,
        name: str | None,
        outcome: str,
        vm_id: str | None = None,
    ) -> CreateRecord:
        """Log a create request and its outcome for the control API."""
        record = CreateRecord(time.time(), sku, region, name, outcome, vm_id)
        self.creates.append(record)
        return record

    # --- provider wire format (overridden per provider) ------------------------------------

    def server_error_response(self, status: int = 500) -> Response:
        """The provider's 5xx."""
        raise NotImplementedError

    def rate_limited_response(self, retry_after: float) -> Response:
        """The provider's 429."""
        raise NotImplementedError

    def rate_limit(self, request: Request) -> Response | None:
        """Count this call against the provider's published limits; a 429 past them."""
        raise NotImplementedError

    def rate_limit_headers(self, request: Request) -> dict[str, str]:
        """Headers that report, on an answer within the limits, what is left of them (none by
        default: only some providers say)."""
        return {}

    def limit_per_ip(self, request: Request, limit: int, window: float) -> Response | None:
        """A per-source-IP fixed window (how Hyperstack and QuantaCloud count); 429 past it."""
        over = self.limiter.hit_per_ip(request, limit, window, time.monotonic())
        return None if over is None else self.rate_limited_response(over)

    def configure(self, body: dict[str, Any]) -> str | None:
        """Apply provider-specific `PUT /_sim/config` keys; returns an error message or None."""
        return None

    def config_view(self) -> dict[str, Any]:
        """Provider-specific settings shown by `GET /_sim/config`."""
        return {}


# --- the control API ---------------------------------------------------------------------
