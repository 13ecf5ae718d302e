"""The expected wait of an order from recorded stock history: reads the rows, leaves the
arithmetic to `app/stock/stats.py`, and keeps each waiting order's answer briefly."""

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.clock import utcnow
from app.core.market import Fees, OrderWants, all_wants_of
from app.core.states import OrderStatus
from app.providers.registry import abilities
from app.services.stock import reads as stock_reads
from app.stock.stats import Estimate, estimate, price_curve, spans_of
from app.storage.models import Order

CACHE_SECONDS = 60.0
_CACHE_LIMIT = 10_000


@dataclass(frozen=True)
class WindowEstimate:
    """The expected wait over a window, at the order's max price (`main`) and at observed
    prices around it (`curve`)."""

    main: Estimate
    curve: tuple[Estimate, ...]
    nodes: int  # the machines wanted together: only offers of that many nodes count
    window: str  # as the API takes it: `7d`, `36h`
    since: datetime
    until: datetime
    includes_generated: bool  # made-up demo history (`autoprovision demo-history`) counted


_cache: dict[tuple[str, timedelta], tuple[float, WindowEstimate]] = {}


def describe_window(window: timedelta) -> str:
    """A window as the API takes it: `7d`, `36h`."""
    seconds = int(window.total_seconds())
    return f"{seconds // 86400}d" if seconds % 86400 == 0 else f"{seconds // 3600}h"


async def expected_wait(
    session: AsyncSession,
    *,
    wants: OrderWants,
    fees: Fees,
    window: timedelta,
    now: datetime | None = None,
    also: Sequence[OrderWants] = (),
) -> WindowEstimate:
    """The expected wait of `wants` over the last `window`, at its max and around it; with
    `also` (an order's other alternatives), the wait for the first of them, and no curve (a
    curve moves one price, and each alternative has its own)."""
    until = now or utcnow()
    since = until - window
    every = (wants, *also)
    seen = []
    for machine in dict.fromkeys(w.machine for w in every):
        keys = await stock_reads.stock(
            session,
            since=since,
            until=until,
            gpu_model=machine.gpu_model,
            gpu_count=machine.gpu_count,
            nodes=machine.nodes,
            providers=frozenset(p for w in every if w.machine == machine for p in w.providers),
        )
        seen += [item for key_stock in keys.values() for item in key_stock.stock]
    providers = frozenset(p for w in every for p in w.providers)
    windows = await stock_reads.coverage(session, since=since, until=until, providers=providers)
    covered = spans_of(stock_reads.span_of(w) for w in windows)
    main = estimate(wants, seen, covered, fees=fees, since=since, now=until, also=also)
    curve = () if also else price_curve(wants, seen, covered, fees=fees, since=since, now=until)
    return WindowEstimate(
        main=main,
        curve=tuple(curve),
        nodes=wants.nodes,
        window=describe_window(window),
        since=since,
        until=until,
        includes_generated=any(w.generated for w in windows),  # generated rows come with it
    )


async def order_estimate(
    session: AsyncSession, *, order: Order, fees: Fees, window: timedelta
) -> WindowEstimate | None:
    """The expected wait of a waiting order (None for any other status), computed at most once
    a minute per order and window in this process."""
    if order.status != OrderStatus.WAITING:
        return None
    key = (order.id, window)
    cached = _cache.get(key)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    first, *others = all_wants_of(order, able=abilities())
    out = await expected_wait(session, wants=first, fees=fees, window=window, also=others)
    if len(_cache) >= _CACHE_LIMIT:
        now = time.monotonic()
        for stale in [k for k, (expires, _) in _cache.items() if expires <= now]:
            del _cache[stale]
        if len(_cache) >= _CACHE_LIMIT:
            _cache.clear()
    _cache[key] = (time.monotonic() + CACHE_SECONDS, out)
    return out
