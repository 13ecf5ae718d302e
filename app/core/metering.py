"""How a running machine is paid for: billing hours paid in advance, and what comes back at the
end, rounded the way its provider bills. Pure (no I/O, no import of the app's layers).

A machine's hours are counted from `billed_from` (when its provider starts billing: when it
runs, or at QuantaCloud when the create is accepted), each `hour_seconds` long (an hour, or less
in tests and demo mode: every rule is measured in billed time). Hour 1 is paid at deploy, hour
k+1 when hour k ends. When the machine ends, the time it billed is rounded up to its provider's
block (Verda: a sixth of an hour; Hyperstack: a sixtieth; QuantaCloud: the whole hour), and
what was paid beyond that is refunded, so the account pays what the provider charges, plus fees.
"""

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


@dataclass(frozen=True)
class BillingUnit:
    """How a provider rounds the time a machine billed, and from when it bills."""

    blocks_per_hour: int  # each block begun is charged in full
    from_accepted: bool = False  # bills from the accepted create, not from running

    def __post_init__(self) -> None:
        if self.blocks_per_hour < 1:
            raise ValueError("a billing hour has at least one block")


def paid_until(billed_from: datetime, paid_hours: int, hour_seconds: float) -> datetime:
    """The end of the last hour paid for."""
    return billed_from + timedelta(seconds=paid_hours * hour_seconds)


def hours_begun(billed_from: datetime, now: datetime, hour_seconds: float) -> int:
    """How many billing hours have begun by `now` (1 from `billed_from` on, 0 before)."""
    if now < billed_from:
        return 0
    return math.floor(_seconds(now - billed_from) / hour_seconds) + 1


def used_blocks(billed_seconds: float, hour_seconds: float, unit: BillingUnit) -> int:
    """The provider's blocks a machine that billed this long is charged for (each begun)."""
    if billed_seconds <= 0:
        return 0
    # To the millisecond: a clock difference of 600.0000001 s must not begin another block.
    seconds = Decimal(str(round(billed_seconds, 3)))
    return math.ceil(seconds * unit.blocks_per_hour / Decimal(str(hour_seconds)))


def used_amount(
    price_per_hour: Decimal, billed_seconds: float, hour_seconds: float, unit: BillingUnit
) -> Decimal:
    """What the time billed costs at `price_per_hour`, in the provider's blocks, to the cent."""
    blocks = used_blocks(billed_seconds, hour_seconds, unit)
    return (price_per_hour * blocks / unit.blocks_per_hour).quantize(CENT, rounding=ROUND_HALF_UP)


def refund(
    price_per_hour: Decimal,
    *,
    paid_hours: int,
    billed_seconds: float,
    hour_seconds: float,
    unit: BillingUnit,
) -> Decimal:
    """What comes back of `paid_hours` paid once the machine has billed `billed_seconds` in all:
    the paid blocks it did not use. Never negative: time run unpaid (a grace) is not charged."""
    paid = price_per_hour * paid_hours
    used = used_amount(price_per_hour, billed_seconds, hour_seconds, unit)
    return max(Decimal(0), paid - used)


def billed_seconds(billed_from: datetime | None, ended_at: datetime) -> float:
    """Seconds a machine billed from `billed_from` until `ended_at` (0 if it never billed)."""
    if billed_from is None or ended_at <= billed_from:
        return 0.0
    return _seconds(ended_at - billed_from)


def affordable_hours(price_per_hour: Decimal, max_total: Decimal) -> int:
    """How many whole hours at `price_per_hour` stay within `max_total`."""
    return int(max_total // price_per_hour) if price_per_hour > 0 else 0


def runway_hours(available: Decimal, hourly_spend: Decimal) -> Decimal | None:
    """How long the available balance pays the machines running now (None: none run)."""
    if hourly_spend <= 0:
        return None
    return (max(available, Decimal(0)) / hourly_spend).quantize(CENT, rounding="ROUND_DOWN")


def is_low_balance(available: Decimal, hourly_spend: Decimal, threshold_hours: float) -> bool:
    """Whether the available balance pays the running machines for less than the threshold."""
    runway = runway_hours(available, hourly_spend)
    return runway is not None and runway < Decimal(str(threshold_hours))


def _seconds(delta: timedelta) -> float:
    return delta.total_seconds()


def terminates_at(
    *,
    billed_from: datetime | None,
    hour_seconds: float,
    price_per_hour: Decimal,
    max_runtime_hours: Decimal | None,
    max_total: Decimal | None,
) -> tuple[datetime, str] | None:
    """When the order's limits end the machine, and which one ("max_runtime" or "max_total"):
    its billed hours reached, or the start of the first hour that would take it past its total.
    Both count from `billed_from` (None: it does not bill yet, so no limit ends it)."""
    if billed_from is None:
        return None
    ends: list[tuple[datetime, str]] = []
    if max_runtime_hours is not None:
        runtime = timedelta(seconds=float(max_runtime_hours) * hour_seconds)
        ends.append((billed_from + runtime, "max_runtime"))
    if max_total is not None:
        hours = affordable_hours(price_per_hour, max_total)
        ends.append((paid_until(billed_from, hours, hour_seconds), "max_total"))
    return min(ends, key=lambda end: end[0]) if ends else None
