"""The base of each provider's simulator: a fleet with a wallet, faults, limits, a request log."""

import random
import time
from collections import deque
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, ClassVar

from starlette.requests import Request
from starlette.responses import Response

from app.simulators.billing import Billed, BillingPolicy, Span, Wallet, bills_at
from app.simulators.exchanges import Exchange, LoggedRequest
from app.simulators.faults import FaultQueue
from app.simulators.limits import FixedWindowLimiter
from app.simulators.network import Latency
from app.simulators.vms import CatalogEntry, Fleet, SimVM
from app.simulators.volumes import PER_SECOND

REQUEST_LOG_SIZE = 1000  # the newest requests kept: a long demo polls forever


class ProviderSimulator(Fleet):
    """A provider-neutral simulated provider; each subclass adds its wire format and statuses."""

    name: ClassVar[str]
    billing: ClassVar[BillingPolicy] = BillingPolicy(block_seconds=1.0, refund_unused=True)

    def __init__(self) -> None:
        super().__init__()
        self.rng = random.Random()
        # Every exchange whole, when a test sets a list here (the contract checks); a reset
        # keeps it. None: only the bounded request log is kept.
        self.exchange_log: list[Exchange] | None = None

    def reset(self) -> None:
        """Back to a fresh start: no stock, no VMs, no faults, default settings."""
        super().reset()
        self.requests: deque[LoggedRequest] = deque(maxlen=REQUEST_LOG_SIZE)
        self.faults = FaultQueue()
        self.wallet = Wallet(self.billing)
        self.rate_limits = True
        self.refused_by_limits = 0  # 429s sent because a published limit was passed
        # How long a billing hour lasts here (`hour_seconds` in the config): shorter in tests
        # and demo mode, where the service's hours are; every block shrinks with it.
        self.hour_seconds = 3600.0
        self.limiter = FixedWindowLimiter()
        # Added before every provider API answer (`latency_ms`, `jitter_ms` in the config): a
        # provider further away than the others. Bytes on the wire: `sim --latency-ms`.
        self.answer_latency = Latency(0.0)

    # --- VMs, with the faults and money they touch ----------------------------------------

    def new_vm(
        self, vm_id: str, entry: CatalogEntry, *, name: str | None, tags: list[str]
    ) -> SimVM:
        """Make a VM that starts booting now (failing instead, if a fault says so)."""
        vm = super().new_vm(vm_id, entry, name=name, tags=tags)
        vm.fail_after_accept = self.faults.take("fail_after_accept") is not None
        return vm

    def refused_create(
        self, *, sku: str | None, region: str | None, name: str | None, kind: str = "instance"
    ) -> Response | None:
        """The refusal a queued `create_refused` fault gives this create (logged as `refused`),
        or None: the create goes on."""
        fault = self.faults.take("create_refused")
        if fault is None:
            return None
        self.record_create(sku=sku, region=region, name=name, outcome="refused", kind=kind)
        return self.refusal_response(fault.status, fault.reason, fault.message)

    def end_vm(self, vm: SimVM) -> None:
        """The provider ends the VM by itself (discontinued, suspended, interrupted): it shows
        `ended_status` from now on and stops billing."""
        self.settle()
        super().end_vm(vm)

    def status_for_response(self, vm: SimVM) -> str:
        """The status to put in an API response: `vm_status`, unless `unknown_status` is queued."""
        if self.faults.take("unknown_status") is not None:
            return "reticulating_splines"  # a value no client has seen: must not crash one
        return self.vm_status(vm)

    # --- money -----------------------------------------------------------------------------

    @property
    def balance(self) -> Decimal:
        """Our account's balance now, after charging every VM for its time so far."""
        self.settle()
        return self.wallet.balance

    @balance.setter
    def balance(self, amount: Decimal) -> None:
        """Set the balance now: what VMs ran up before is settled, later charges come off it."""
        self.settle()
        self.wallet.balance = amount

    def billed(self) -> Iterable[SimVM]:
        """Everything the wallet pays for: the VMs (Verda adds its clusters)."""
        return self.vms.values()

    def settle(self) -> None:
        """Charge every VM, cluster and volume what it owes by now (see `Wallet.settle`)."""
        now = self.clock()
        hour = self.hour_seconds
        for vm in self.billed():
            extra = self.extra_charge(vm, now)
            self.wallet.settle(vm, self.billable_span(vm), extra, now, hour_seconds=hour)
        for volume in self.volumes.values():
            volume.empty_trash(now)
            self.wallet.settle(volume, volume.span(), Decimal(0), now, PER_SECOND, hour)

    def billable_span(self, vm: SimVM) -> Span | None:
        """When the VM bills; by default from when it runs until a delete is accepted, and
        never if it fails before it runs. Providers that bill otherwise override this."""
        if vm.fail_after_accept:
            return None
        return Span(vm.started + max(self.boot_seconds, 0.0), vm.stopped_billing)

    def extra_charge(self, vm: SimVM, now: float) -> Decimal:
        """What else the VM has cost by `now` besides its hours (none by default)."""
        return Decimal(0)

    def hourly_charge(self) -> Decimal:
        """What the VMs (and clusters) billing now cost per hour together."""
        now = self.clock()
        billing_now: list[Billed] = [
            vm for vm in self.billed() if bills_at(self.billable_span(vm), now)
        ]
        billing_now += [v for v in self.volumes.values() if bills_at(v.span(), now)]
        return sum((item.hourly_price for item in billing_now), Decimal(0))

    # --- provider wire format (overridden per provider) ------------------------------------

    def server_error_response(self, status: int = 500) -> Response:
        """The provider's 5xx."""
        raise NotImplementedError

    def rate_limited_response(self, retry_after: float) -> Response:
        """The provider's 429."""
        raise NotImplementedError

    def refusal_response(self, status: int, reason: str | None, message: str) -> Response:
        """A 4xx refusal in the provider's error envelope (`reason`: its error code, if any)."""
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
