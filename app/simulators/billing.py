"""How a simulator charges its balance for the VMs it runs: the money arithmetic, in Decimal.

Each provider bills a VM over a span of its simulated clock (from when it starts billing until a
delete or a failure stops it) in blocks of its own length: each block begun is charged in full,
and some providers give back the unused part of the last block once the VM is gone. The
simulators charge lazily: whenever the balance is read (or a create checks it) every VM's charge
so far is worked out from the clock and the difference taken from the balance.
"""

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

MICRO = Decimal("0.000001")
SECONDS_PER_HOUR = Decimal(3600)


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
    price_per_hour: Decimal, span: Span | None, now: float, policy: BillingPolicy
) -> Decimal:
    """What a VM billed over `span` owes at `now`, in dollars rounded to micro-dollars."""
    if span is None or now < span.start:
        return Decimal(0)
    ended = span.end is not None and span.end <= now
    stop = span.end if ended and span.end is not None else now
    if stop < span.start:
        return Decimal(0)  # stopped before it ever billed
    # Milliseconds: clock differences like 3600.0000000001 must not begin another block.
    seconds = round(stop - span.start, 3)
    if not (ended and policy.refund_unused):
        blocks = max(1, math.ceil(seconds / policy.block_seconds))
        seconds = blocks * policy.block_seconds
    amount = price_per_hour * Decimal(str(seconds)) / SECONDS_PER_HOUR
    return amount.quantize(MICRO, rounding=ROUND_HALF_UP)


def parse_amount(value: object) -> Decimal | None:
    """A balance from JSON: a decimal string or a number (not a bool, NaN or infinity)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        amount = Decimal(str(value).strip()) if value != "" else None
    except InvalidOperation:
        return None
    return amount if amount is not None and amount.is_finite() else None
