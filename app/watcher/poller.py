"""One job per provider: read stock while some waiting order wants it, and at a slow period
(for the stock history) while none does. Each turn says when the next is due.

While orders wait, a planned provider's reads go as soon as its budget lets them (see
`app.providers.budget`), never more often than every `MIN_READ_SECONDS`; a provider whose
period is set is read every period, as told.
"""

import logging
import time
from collections.abc import Awaitable, Callable, Collection

from app.providers.base import MachineKey, Offer, ProviderAdapter, ProviderError, RateLimited
from app.providers.budget import MIN_READ_SECONDS
from app.providers.registry import described
from app.support.metrics import POLL_ERRORS, POLL_SECONDS, POLLS_SKIPPED, PROVIDER_REQUEST_RATE

log = logging.getLogger(__name__)
IDLE_RECHECK_SECONDS = 0.2  # how soon a provider nobody wants is looked at again
MAX_BACKOFF_SECONDS = 30.0


class ProviderPoller:
    """Reads one provider's stock on its own schedule; failures slow only this provider."""

    def __init__(
        self,
        adapter: ProviderAdapter,
        *,
        period: float,
        wanted: Callable[[], bool],
        on_offers: Callable[[list[Offer], float, float], Awaitable[None]],
        on_error: Callable[[str], Awaitable[None]],
        clock: Callable[[], float] = time.monotonic,
        history_period: float = 0.0,
        planned: bool = False,
        machines: Callable[[], Collection[MachineKey]] = frozenset,
    ) -> None:
        self.adapter = adapter
        self.period = period  # set, or the plan's with nothing else sent: see `ProviderSpec`
        self.planned = planned
        self.machines = machines  # what the waiting orders for this provider want
        self.history_period = history_period  # 0: nobody wants it, nothing is read
        self.wanted = wanted
        self.on_offers = on_offers
        self.on_error = on_error
        # The `started` handed to `on_offers` is on this clock: give the offer book the same.
        self.clock = clock
        self.backoff = 0.0
        self.paused_until = 0.0
        self.last_read_at = float("-inf")
        # After a fixed-period read: its start, the wait after it, the soonest an order that
        # comes to want the provider ends that wait, and whether one wanted it then.
        self._after_read: tuple[float, float, float, bool] | None = None

    def pause(self, seconds: float) -> None:
        """Hold off this provider (e.g. a create was rate limited)."""
        self.paused_until = max(self.paused_until, self.clock() + seconds)

    async def step(self) -> float:
        """One turn: a read if one is due; the seconds until the next turn (the scheduler
        runs it then, as a `PacedJob`)."""
        provider = str(self.adapter.provider)
        if (waiting := self._waiting_after_read()) is not None:
            return waiting
        wait = self.paused_until - self.clock()
        if wait > 0:
            return wait
        wanted = self.wanted()
        if not wanted and self.history_period <= 0:
            POLLS_SKIPPED.labels(provider).inc()
            return min(self.period, IDLE_RECHECK_SECONDS)
        if wanted and self.planned:
            return await self._planned_read(provider)
        period = self.period if wanted else max(self.history_period, self.period)
        started = self.clock()
        delay = await self._poll_once(provider, period, self.machines() if wanted else None)
        # A slow (history) wait ends early when an order comes to want this provider, once
        # the usual period has passed; a back-off or a provider's pause is waited in full.
        soonest = self.period if delay == period else delay
        self._after_read = (started, delay, soonest, wanted)
        return self._waiting_after_read() or 0.0

    def _waiting_after_read(self) -> float | None:
        """How long until the turn after a fixed-period read may read again (None: now)."""
        if self._after_read is None:
            return None
        started, delay, soonest, wanted = self._after_read
        elapsed = self.clock() - started
        if elapsed < delay:
            if wanted:
                return delay - elapsed
            if not (self.wanted() and elapsed >= soonest):
                return min(delay - elapsed, IDLE_RECHECK_SECONDS)
        self._after_read = None
        return None

    async def _planned_read(self, provider: str) -> float:
        """The next read the budget allows, or a short wait for it (the orders may change)."""
        machines = self.machines()
        wait, _ = self.adapter.budget.soonest(self.adapter.stock_reads(machines))
        wait = max(wait, self.last_read_at + MIN_READ_SECONDS - self.clock())
        if wait > 0:
            return min(wait, IDLE_RECHECK_SECONDS)
        started = self.clock()
        self.last_read_at = started
        delay = await self._poll_once(provider, self.period, machines)
        for bucket, rates in self.adapter.budget.rates().items():
            for kind, per_minute in zip(("limit", "planned", "used"), rates, strict=True):
                PROVIDER_REQUEST_RATE.labels(provider, bucket, kind).set(per_minute)
        left = delay - (self.clock() - started)
        if delay != self.period and left > 0:  # a failure: back off, or wait out a pause
            return left
        return 0.0

    async def _poll_once(
        self, provider: str, period: float, machines: Collection[MachineKey] | None = None
    ) -> float:
        """One read and its follow-up; returns how long after its start the next may begin."""
        started = self.clock()
        try:
            offers = await self.adapter.fetch_offers(machines)
        except RateLimited as exc:
            POLL_ERRORS.labels(provider, "rate_limited").inc()
            await self.on_error(described(exc))
            self.backoff = self._next_backoff()
            return max(exc.retry_after or 0.0, self.backoff)
        except ProviderError as exc:
            POLL_ERRORS.labels(provider, type(exc).__name__.lower()).inc()
            await self.on_error(described(exc))
            self.backoff = self._next_backoff()
            return self.backoff
        except Exception:  # a bug in an adapter must not stop the watching
            log.exception("%s: stock read crashed", provider)
            POLL_ERRORS.labels(provider, "crash").inc()
            await self.on_error("stock read failed unexpectedly")
            self.backoff = self._next_backoff()
            return self.backoff
        POLL_SECONDS.labels(provider).observe(self.clock() - started)
        self.backoff = 0.0
        try:
            await self.on_offers(offers, started, period)
        except Exception:
            log.exception("%s: handling fresh offers failed", provider)
        return period

    def _next_backoff(self) -> float:
        return min(max(self.period * 2, self.backoff * 2), MAX_BACKOFF_SECONDS)
