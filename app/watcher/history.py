"""Stock history kept in memory by the watcher and written in batches, off the hot path.

Each successful read is `observe`d after its deploy pass has launched its creates: that works
out, in memory, which intervals open, stay, change price or go, and how far the provider's
coverage window reaches. `flush` (a watcher job, about every second) writes what changed in
one transaction. An unchanged read only moves `last_seen_at`, which is written at most every
`write_every` seconds per row while the row stays open, and exactly when it closes. What a
provider says it plans to have (`observe_forecasts`) is written in the same batch, only when it
differs from what was written before.
"""

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.clock import utcnow
from app.core.ids import new_id
from app.core.market import Fees, OfferKey
from app.providers.base import Offer, StockForecast
from app.services.stock import forecasts as stock_forecasts
from app.services.stock import history as stock_history
from app.services.stock.history import Changes, Interval, Window
from app.storage.db import session_scope

log = logging.getLogger(__name__)
GAP_PERIODS = 3  # no read for this many periods: the provider was not being looked at
MIN_GAP_SECONDS = 1.0  # ...nor for less than this (one slow answer is not a gap)
WRITE_EVERY_SECONDS = 5.0  # an open row's last read is rewritten at most this often


def _gap(period: float) -> timedelta:
    return timedelta(seconds=max(GAP_PERIODS * period, MIN_GAP_SECONDS))


class StockHistory:
    """What is in stock and what is being read, as last written plus what changed since."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        fees: Fees,
        clock: Callable[[], datetime] = utcnow,
        write_every: float = WRITE_EVERY_SECONDS,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.fees = fees
        self.clock = clock
        self.write_every = timedelta(seconds=write_every)
        self.open: dict[OfferKey, Interval] = {}
        self.windows: dict[str, Window] = {}
        self._closed: list[Interval] = []  # closed since the last flush
        self._ended: list[Window] = []
        # id -> (last read, max quantity) as last written, for the rows still open
        self._stored: dict[str, tuple[datetime, int | None]] = {}
        # provider -> its forecasts as last written; and, to write, as said since (and when)
        self._forecasts_written: dict[str, frozenset[StockForecast]] = {}
        self._forecasts_said: dict[str, tuple[frozenset[StockForecast], datetime]] = {}
        self._flushing = asyncio.Lock()

    def observe(
        self, provider: str, offers: list[Offer], *, read_at: datetime, period: float
    ) -> None:
        """A successful read of `provider` at `read_at`, polled every `period` seconds."""
        window = self.windows.get(provider)
        if window is not None and read_at - window.last_read_at > _gap(window.period_seconds):
            self._stop_reading(provider)
            window = None
        elif window is not None and window.period_seconds != period:
            self._end_window(window)
            window = None
        if window is None:
            self.windows[provider] = Window(new_id("cov"), provider, period, read_at, read_at)
        else:
            window.last_read_at = max(window.last_read_at, read_at)
        seen: dict[OfferKey, Offer] = {}
        for offer in offers:
            seen.setdefault(offer.key, offer)
        for key in [k for k in self.open if k[0] == provider]:
            now_seen = seen.get(key)
            if now_seen is None or self._terms(now_seen) != _terms_of(self.open[key]):
                self._close(key, gone_at=read_at)
        for key, offer in seen.items():
            interval = self.open.get(key)
            if interval is None:
                self.open[key] = self._opened(offer, read_at)
                continue
            interval.last_seen_at = max(interval.last_seen_at, read_at)
            if offer.available is not None:
                interval.max_available = max(interval.max_available or 0, offer.available)

    def observe_forecasts(
        self, provider: str, forecasts: list[StockForecast] | None, *, read_at: datetime
    ) -> None:
        """What a successful read of `provider` at `read_at` said it plans to have (None: that
        read did not say, and what is stored stays)."""
        if forecasts is None:
            return
        said = frozenset(forecasts)
        pending = self._forecasts_said.get(provider)
        if said == (pending[0] if pending else self._forecasts_written.get(provider)):
            return  # said before: the first read that said it is when it changed
        self._forecasts_said[provider] = (said, read_at)

    def expire(self, now: datetime) -> None:
        """Close the windows of providers not read for a while (and what they had in stock)."""
        for provider, window in list(self.windows.items()):
            if now - window.last_read_at > _gap(window.period_seconds):
                self._stop_reading(provider)

    async def flush(self) -> None:
        """Write what changed since the last flush, in one transaction."""
        async with self._flushing:
            self.expire(self.clock())
            closed, self._closed = self._closed, []
            ended, self._ended = self._ended, []
            opened = [
                i for i in self.open.values() if self._due(i.id, i.last_seen_at, i.max_available)
            ]
            reading = [w for w in self.windows.values() if self._due(w.id, w.last_read_at, None)]
            # Copies: reads observed while this batch is written go to the next one.
            changes = Changes(
                intervals=[replace(i) for i in closed + opened],
                windows=[replace(w) for w in ended + reading],
            )
            said = dict(self._forecasts_said)  # kept until written: a failed batch retries them
            if not changes and not said:
                return
            try:
                async with session_scope(self.sessionmaker) as session:
                    await stock_history.apply(session, changes)
                    for provider, (forecasts, read_at) in said.items():
                        await stock_forecasts.record(session, provider, forecasts, read_at=read_at)
            except BaseException:
                self._closed[:0] = closed  # written again next time (rows go by id)
                self._ended[:0] = ended
                raise
            for provider, written in said.items():
                self._forecasts_written[provider] = written[0]
                if self._forecasts_said.get(provider) == written:  # nothing newer said since
                    del self._forecasts_said[provider]
            for interval in changes.intervals:
                if interval.gone_at is None:
                    self._stored[interval.id] = (interval.last_seen_at, interval.max_available)
                else:
                    self._stored.pop(interval.id, None)
            for window in changes.windows:
                if window.ended_at is None:
                    self._stored[window.id] = (window.last_read_at, None)
                else:
                    self._stored.pop(window.id, None)

    def _due(self, row_id: str, last: datetime, max_available: int | None) -> bool:
        stored = self._stored.get(row_id)
        if stored is None:
            return True
        return stored[1] != max_available or last - stored[0] >= self.write_every

    def _terms(self, offer: Offer) -> tuple[object, ...]:
        """What makes an appearance: a change in any of these closes one interval."""
        return (
            offer.gpu_model,
            offer.gpu_count,
            offer.nodes,
            None if offer.interconnect is None else str(offer.interconnect),
            None if offer.cluster_interconnect is None else str(offer.cluster_interconnect),
            offer.disk_gb,
            offer.disk_fixed,
            offer.price_per_hour,
            self.fees.percent,
            self.fees.flat_per_hour,
        )

    def _opened(self, offer: Offer, read_at: datetime) -> Interval:
        provider, region, sku = offer.key
        return Interval(
            id=new_id("stk"),
            provider=provider,
            region=region,
            sku=sku,
            gpu_model=offer.gpu_model,
            gpu_count=offer.gpu_count,
            interconnect=None if offer.interconnect is None else str(offer.interconnect),
            disk_gb=offer.disk_gb,
            disk_fixed=offer.disk_fixed,
            price_per_hour=offer.price_per_hour,
            fee_percent=self.fees.percent,
            fee_flat_per_hour=self.fees.flat_per_hour,
            price_per_hour_with_fees=self.fees.apply(offer.price_per_hour),
            first_seen_at=read_at,
            last_seen_at=read_at,
            max_available=offer.available,
            nodes=offer.nodes,
            cluster_interconnect=(
                None if offer.cluster_interconnect is None else str(offer.cluster_interconnect)
            ),
        )

    def _close(self, key: OfferKey, *, gone_at: datetime) -> None:
        interval = self.open.pop(key)
        interval.gone_at = gone_at
        self._closed.append(interval)

    def _end_window(self, window: Window) -> None:
        window.ended_at = window.last_read_at
        self._ended.append(window)
        del self.windows[window.provider]

    def _stop_reading(self, provider: str) -> None:
        """Reading stopped: its window ends, and what was in stock is closed at the last read
        (not known to be gone, but no longer watched: coverage tells the two apart)."""
        window = self.windows[provider]
        for key in [k for k in self.open if k[0] == provider]:
            self._close(key, gone_at=max(self.open[key].last_seen_at, window.last_read_at))
        self._end_window(window)


def _terms_of(interval: Interval) -> tuple[object, ...]:
    return (
        interval.gpu_model,
        interval.gpu_count,
        interval.nodes,
        interval.interconnect,
        interval.cluster_interconnect,
        interval.disk_gb,
        interval.disk_fixed,
        interval.price_per_hour,
        interval.fee_percent,
        interval.fee_flat_per_hour,
    )
