"""What an order's limits mean for its machine, in a sentence for its timeline."""

from datetime import datetime

from app.core import metering
from app.core.clock import utcnow
from app.core.money import format_usd
from app.core.states import OrderEventKind
from app.services.timeline import Line
from app.storage.models import Attempt, Order


def format_time(moment: datetime) -> str:
    """`14:00:05 UTC` (with the date when it is not today's)."""
    if moment.date() == utcnow().date():
        return moment.strftime("%H:%M:%S UTC")
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def terminates_at(order: Order, attempt: Attempt) -> tuple[datetime, str] | None:
    """When the order's limits end this machine, and which limit does."""
    return metering.terminates_at(
        billed_from=attempt.billed_from,
        hour_seconds=attempt.billing_hour_seconds,
        price_per_hour=attempt.price_per_hour_with_fees,
        max_runtime_hours=order.max_runtime_hours,
        max_total=order.max_total_usd,
    )


def limits_line(order: Order, attempt: Attempt) -> Line | None:
    """`Terminates at 14:00:00 UTC (max runtime 12 h).`, or None without a limit that applies."""
    end = terminates_at(order, attempt)
    if end is None:
        return None
    moment, limit = end
    if limit == "max_runtime" and order.max_runtime_hours is not None:
        why = f"max runtime {order.max_runtime_hours.normalize():f} h"
    elif order.max_total_usd is not None:
        why = f"max total {format_usd(order.max_total_usd)}"
    return Line(order.id, OrderEventKind.LIMITS, f"Terminates at {format_time(moment)} ({why}).")
