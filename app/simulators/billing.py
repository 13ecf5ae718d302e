"""A simulator's money: our balance, and what the VMs it runs are charged from it, in Decimal."""

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Protocol

MICRO = Decimal("0.000001")
SECONDS_PER_HOUR = Decimal(3600)
DEFAULT_BALANCE = Decimal("10000.00")
BALANCE_PROBLEM = 'balance must be a decimal string or a number, e.g. {"balance": "123.45"}'


@dataclass(frozen=True)
class BillingPolicy:
    """How a provider turns time into money."""

    block_seconds: float  # billed in blocks of this length; each block begun costs in full
    refund_unused: bool  # once the VM is gone, the unused rest of its last block comes back


@dataclass(frozen=True)
class Span:
    """When a VM bills, in simulator clock seconds: from `start` until `end` (None: still)."""

    start: float
    end: float | None = None


def charge(
    price_per_hour: Decimal,
    span: Span | None,
    now: float,
    policy: BillingPolicy,
    hour_seconds: float = 3600.0,
) -> Decimal:
    """What a VM billed over `span` owes at `now`, in dollars rounded to micro-dollars, its
    hour `hour_seconds` long (shorter in tests and demo mode: the blocks shrink with it)."""
    if span is None or now < span.start:
        return Decimal(0)
    ended = span.end is not None and span.end <= now
    stop = span.end if ended and span.end is not None else now
    if stop < span.start:
        return Decimal(0)  # stopped before it ever billed
    # Milliseconds: clock differences like 3600.0000000001 must not begin another block.
    hours = Decimal(str(round(stop - span.start, 3))) / Decimal(str(hour_seconds))
    if not (ended and policy.refund_unused):
        per_hour = SECONDS_PER_HOUR / Decimal(str(policy.block_seconds))
        hours = max(1, math.ceil(hours * per_hour)) / per_hour
    return (price_per_hour * hours).quantize(MICRO, rounding=ROUND_HALF_UP)


def bills_at(span: Span | None, now: float) -> bool:
    """Whether a VM billed over `span` is billing at `now`."""
    return span is not None and span.start <= now and (span.end is None or span.end > now)


class Billed(Protocol):
    """Anything the wallet charges: a VM, a cluster, a volume."""

    charged: Decimal

    @property
    def hourly_price(self) -> Decimal: ...


class Wallet:
    """Our account's balance at one provider, and how that provider bills its VMs."""

    def __init__(self, policy: BillingPolicy, balance: Decimal = DEFAULT_BALANCE) -> None:
        self.policy = policy
        # As of the last `settle`: charges are worked out lazily from the clock, so whoever
        # reads the balance settles every VM first (`ProviderSimulator.balance`).
        self.balance = balance

    def settle(
        self,
        vm: Billed,
        span: Span | None,
        extra: Decimal,
        now: float,
        policy: BillingPolicy | None = None,
        hour_seconds: float = 3600.0,
    ) -> None:
        """Bring what `vm` was charged to what it owes by `now`; the balance pays the difference.
        `policy`: how this one bills, when not as the provider's machines do (volumes)."""
        due = charge(vm.hourly_price, span, now, policy or self.policy, hour_seconds) + extra
        if due != vm.charged:
            self.balance -= due - vm.charged
            vm.charged = due


def parse_amount(value: object) -> Decimal | None:
    """A balance from JSON: a decimal string or a number (not a bool, NaN or infinity)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        amount = Decimal(str(value).strip()) if value != "" else None
    except InvalidOperation:
        return None
    return amount if amount is not None and amount.is_finite() else None
