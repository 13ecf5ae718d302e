"""A provider's published rate limits as buckets, what was sent against each, and when the next
stock read may go.

Every request a provider adapter sends is written down (`sent`) with the buckets it counts
against. A stock read may go when, in every bucket it counts against:

- what was sent in the bucket's window, plus the read, stays under the limit less a margin
  (`CREATE_MARGIN_SHARE` of it where creates count, so that a burst of stock always finds room
  for its creates; `EDGE_MARGIN` elsewhere, for the provider counting a request our clock put
  just outside the window);
- and stock reads are spread evenly: what the window leaves after everything that is not a
  stock read (creates, status reads, reconciles, balance reads) is the reads' share, and the
  last stock request in the bucket was at least `window / share` ago.

Windows are counted as sliding, which is stricter than a provider's fixed windows: no fixed
window can hold more than any sliding one. Where the provider also reports what is left
(`Headroom`, from Verda's `RateLimit` header), the reads are spread over what it reports too,
so that another client of the same account slows ours down before a 429, not after.
"""

import math
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from app.providers.headroom import CREATE_RESERVE, Headroom

# Per window, in every bucket a create counts against: the creates of a burst of stock and
# their first status reads (a twentieth of the limit, at least `CREATE_MARGIN_MIN`).
CREATE_MARGIN_SHARE = 0.05
CREATE_MARGIN_MIN = 6
EDGE_MARGIN = 2  # per window, in the others
# Of what a bucket stock reads count in leaves after its margin, this much is kept for the reads:
# other requests (status reads, reconciles, balance reads) that would eat into it are held back.
READ_FLOOR_SHARE = 0.25
# And this much is left to the other requests even while they send less (in a path of its own,
# to follow-up reads that cannot wait for their turn): reads planned on all
# that is left would fill the window before a burst of follow-ups comes, and stall until it rolls.
OTHERS_SHARE = 0.1
MIN_HISTORY_SECONDS = 10.0  # other requests over less than this are not extrapolated further
MIN_READ_SECONDS = 0.1  # stock is never read more often than this, however high the limits
WINDOW_SLACK = 1.0  # seconds added to each window: a request's arrival trails its sending

Request = tuple[str, str]  # (method, path below the API's base URL, without the query)
StockRead = tuple[Request, ...]  # the requests one stock read sends


def every_request(bucket: str) -> Callable[[str, str], str | None]:
    """A limit on everything sent (per IP, per project): one bucket named `bucket`."""
    return lambda _method, _path: bucket


def per_endpoint(*, except_: Collection[Request] = ()) -> Callable[[str, str], str | None]:
    """A limit per (method, path): a bucket of its own for every path, `except_` those."""
    return lambda method, path: None if (method, path) in except_ else f"{method} {path}"


def only(method: str, path: str) -> Callable[[str, str], str | None]:
    """A limit on one (method, path)."""
    return lambda m, p: f"{method} {path}" if (m, p) == (method, path) else None


@dataclass(frozen=True)
class RateLimit:
    """A limit the provider publishes: `requests` per `seconds`, counted per `scope`; `bucket`
    says which bucket a request counts against under this limit (None: not counted)."""

    requests: int
    seconds: float
    scope: str
    bucket: Callable[[str, str], str | None]


@dataclass(frozen=True)
class Published:
    """What a provider's client needs to count its requests: the published limits, the create
    request (its buckets keep a margin for creates), and which requests are stock reads."""

    rate_limits: tuple[RateLimit, ...] = ()
    create: Request | None = None
    is_stock_read: Callable[[str, str], bool] = lambda _method, _path: False


@dataclass
class _Bucket:
    limit: RateLimit
    margin: int
    since: float  # when it was first used: a window not yet full of history is scaled up
    sent: deque[tuple[float, bool]] = field(default_factory=deque)  # (when, a stock read's)
    last_stock: float = float("-inf")

    @property
    def span(self) -> float:
        """The window as counted here: the provider's plus `WINDOW_SLACK`. Reads are spread
        over it too, so that evenly spread reads never fill it (spread over the provider's
        window, a sliding count of the longer one always overflows, and the hard limit then
        stalls the reads until the oldest leave)."""
        return self.limit.seconds + WINDOW_SLACK

    def forget_before(self, now: float) -> None:
        horizon = now - self.span
        while self.sent and self.sent[0][0] <= horizon:
            self.sent.popleft()

    def used(self, now: float) -> int:
        """Requests sent in the provider's own window up to `now`."""
        return sum(1 for when, _ in self.sent if when > now - self.limit.seconds)

    @property
    def usable(self) -> int:
        """Requests per window less the margin."""
        return self.limit.requests - self.margin

    @property
    def floor(self) -> int:
        """What other requests are left per window even while they send less."""
        return math.ceil(self.usable * OTHERS_SHARE)

    def share(self, now: float) -> int:
        """Requests per window (`span`) left for planned stock reads after everything else:
        at the rate it was sent plus room for its bursts (two standard deviations of a
        Poisson count), or `floor`, if more."""
        others = sum(1 for _, stock in self.sent if not stock)
        seen = min(self.span, max(now - self.since, MIN_HISTORY_SECONDS))
        expected = math.ceil(others * self.span / seen)
        return self.usable - max(expected + math.ceil(2 * math.sqrt(expected)), self.floor)


class Budget:
    """One provider's buckets: what was sent, and when the next stock read fits the plan."""

    def __init__(
        self,
        limits: Sequence[RateLimit],
        *,
        create: Request | None = None,
        is_stock_read: Callable[[str, str], bool] = lambda _method, _path: False,
        headroom: Headroom | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = tuple(limits)
        self.create = create
        self.is_stock_read = is_stock_read
        self.headroom = headroom
        self.clock = clock
        self.buckets: dict[str, _Bucket] = {}
        self.read_buckets: set[str] = set()  # the buckets stock reads count against
        self._unplanned: set[Request] = set()
        self.last_read_at = float("-inf")  # the last planned stock request, of any path

    def _keys(self, method: str, path: str) -> list[tuple[str, RateLimit]]:
        found = []
        for limit in self.limits:
            key = limit.bucket(method, path)
            if key is not None:
                found.append((key, limit))
        return found

    def _bucket(self, key: str, limit: RateLimit) -> _Bucket:
        bucket = self.buckets.get(key)
        if bucket is None:
            creates_count = self.create is not None and limit.bucket(*self.create) == key
            margin = EDGE_MARGIN
            if creates_count:
                margin = max(CREATE_MARGIN_MIN, int(limit.requests * CREATE_MARGIN_SHARE))
            bucket = _Bucket(limit, margin, self.clock())
            self.buckets[key] = bucket
        return bucket

    @contextmanager
    def unplanned(self, read: StockRead) -> Iterator[None]:
        """Within: `read` is sent outside the plan (a follow-up that cannot wait for its turn),
        so it counts like any other request and does not move the planned reads' turn: a
        follow-up right after one path's read would otherwise put both paths' next turns at
        the same moment."""
        self._unplanned.update(read)
        try:
            yield
        finally:
            self._unplanned.difference_update(read)

    def sent(self, method: str, path: str) -> None:
        """Write down one request as sent now."""
        now = self.clock()
        stock = self.is_stock_read(method, path) and (method, path) not in self._unplanned
        for key, limit in self._keys(method, path):
            bucket = self._bucket(key, limit)
            bucket.sent.append((now, stock))
            if stock:
                bucket.last_stock = now
                self.read_buckets.add(key)
        if stock:
            self.last_read_at = now
        if len(self.buckets) > 1000:  # paths with ids: forget the buckets with nothing in them
            for key in [k for k, b in self.buckets.items() if k not in self.read_buckets]:
                self.buckets[key].forget_before(now)
                if not self.buckets[key].sent:
                    del self.buckets[key]

    def hold(self, method: str, path: str, *, urgent: bool = False) -> float:
        """Seconds to hold back a request that is neither a create nor a stock read (0: send
        it), so that such requests never take the share kept for stock reads. An `urgent` one
        (what a create or a delete needs: `base.urgent`) may take that share too, and is held
        only where every request sent leaves no room under the limit less its margin: a
        machine left running costs more than a stock read put off."""
        if (method, path) == self.create or self.is_stock_read(method, path):
            return 0.0
        now = self.clock()
        wait = 0.0
        for key, limit in self._keys(method, path):
            if not urgent and key not in self.read_buckets:
                continue
            bucket = self._bucket(key, limit)
            bucket.forget_before(now)
            if urgent:  # every request sent counts against the limit less its margin
                allowed = bucket.usable
                sent = [when for when, _stock in bucket.sent]
            else:  # other requests count against what the reads' floor leaves
                allowed = bucket.usable - int(bucket.usable * READ_FLOOR_SHARE)
                sent = [when for when, stock in bucket.sent if not stock]
            if len(sent) >= allowed:
                wait = max(wait, sent[len(sent) - allowed] + bucket.span - now)
        return wait

    def wait(self, read: StockRead) -> float:
        """Seconds until `read` fits the plan (0: it may go now)."""
        return max(self._fits_in(read), self._spread_in(read))

    def fits(self, read: StockRead) -> bool:
        """Whether `read` may go now, spread or not (a follow-up read that cannot wait for its
        turn): without taking a bucket past its limit less its margin, or, where the provider
        reports what is left of every bucket it counts in, with room left there.

        Our windows slide and are a second longer than the provider's, so they can be full
        while the provider's own window has room: a follow-up refused then would wait for
        the next planned read, the very delay it is there to avoid."""
        return self._fits_in(read) <= 0 or self._reported_room(read)

    def _reported_room(self, read: StockRead) -> bool:
        if self.headroom is None:
            return False
        now = self.clock()
        for key, (_limit, count) in self._needs(read).items():
            shared = key in self.headroom.shared
            entry = self.headroom.reported(key)
            if entry is None:
                return False  # not reported: our own count decides
            left, resets_at = entry
            if resets_at > now and left - count <= (CREATE_RESERVE if shared else 0):
                return False
        return True

    def soonest(self, reads: Sequence[StockRead]) -> tuple[float, StockRead]:
        """The read that may go first, and in how many seconds. Of reads that may go at the
        same time, the first of `reads` (the one that sees the most: the full list), then the
        one whose own path has waited longest."""
        if not reads:
            raise ValueError("no stock read to plan")
        # Not ranked by the shared buckets' last read: every read counts in those, so the tie
        # would fall to the order of `reads`, and the paths late in it would never be read.
        ranked = sorted(
            (self.wait(r), i > 0, self._own_last_stock(r), i) for i, r in enumerate(reads)
        )
        wait, _, _, first = ranked[0]
        # Reads of different paths are spaced evenly between them too: each path's own spacing
        # alone would let two paths read a moment apart and then both wait a whole period.
        rate = sum(1 / interval for r in reads if (interval := self._interval(r)) > 0)
        if rate > 0 and len(reads) > 1:
            wait = max(wait, self.last_read_at + 1 / rate - self.clock())
        return wait, reads[first]

    def _interval(self, read: StockRead) -> float:
        """The planned seconds between two reads of `read` (0: nothing limits it)."""
        now = self.clock()
        interval = 0.0
        for key, (limit, count) in self._needs(read).items():
            bucket = self._bucket(key, limit)
            interval = max(interval, bucket.span * count / max(bucket.share(now), 1))
        return interval

    def _own_last_stock(self, read: StockRead) -> float:
        """The last stock read in the bucket of `read`'s that was read longest ago."""
        keys = [key for request in read for key, _ in self._keys(*request)]
        return min(
            (self.buckets[key].last_stock if key in self.buckets else float("-inf")) for key in keys
        )

    def _last_stock(self, read: StockRead) -> float:
        keys = [key for request in read for key, _ in self._keys(*request)]
        return max(
            (self.buckets[key].last_stock for key in keys if key in self.buckets),
            default=float("-inf"),
        )

    def _needs(self, read: StockRead) -> dict[str, tuple[RateLimit, int]]:
        needs: dict[str, tuple[RateLimit, int]] = {}
        for request in read:
            for key, limit in self._keys(*request):
                needs[key] = (limit, needs.get(key, (limit, 0))[1] + 1)
        return needs

    def _fits_in(self, read: StockRead) -> float:
        now = self.clock()
        wait = 0.0
        for key, (limit, count) in self._needs(read).items():
            bucket = self._bucket(key, limit)
            bucket.forget_before(now)
            over = len(bucket.sent) + count - bucket.usable
            if over > 0:  # wait until enough of the oldest leave the window
                leaves = bucket.sent[min(over, len(bucket.sent)) - 1][0]
                wait = max(wait, leaves + bucket.span - now)
        return wait

    def _spread_in(self, read: StockRead) -> float:
        now = self.clock()
        wait = 0.0
        for key, (limit, count) in self._needs(read).items():
            bucket = self._bucket(key, limit)
            bucket.forget_before(now)
            share = bucket.share(now)
            if share < count:
                continue  # nothing to spread: `_fits_in` waits for the window
            wait = max(wait, bucket.last_stock + bucket.span * count / share - now)
        return max(wait, self._reported_in(read, now))

    def _reported_in(self, read: StockRead, now: float) -> float:
        """Spread over what the provider itself says is left, where it says so."""
        if self.headroom is None:
            return 0.0
        reported = list(self.headroom.shared.items())
        reported += [
            (key, entry)
            for key, entry in self.headroom.endpoints.items()
            if tuple(key.split(" ", 1)) in read
        ]
        wait = 0.0
        for name, (left, resets_at) in reported:
            # From the last stock read in that bucket (ours is named like the provider's where
            # the limits are written so: "project", "GET /path"), not the last of any path.
            ours = self.buckets.get(name)
            last = ours.last_stock if ours is not None else self._last_stock(read)
            window_left = resets_at - now
            if window_left <= 0:
                continue  # a new window: what it reported is over
            # What is left is exact: only a shared bucket keeps requests back, for creates.
            share = left - (CREATE_RESERVE if name in self.headroom.shared else 0)
            if share <= 0:
                wait = max(wait, window_left)
            else:
                wait = max(wait, last + window_left / share - now)
        return wait

    def nominal_period(self, read: StockRead) -> float:
        """Seconds between reads of `read` alone, with nothing else sent: the plan's period."""
        period = 0.0
        for key, (limit, count) in self._needs(read).items():
            bucket = self._bucket(key, limit)
            empty = _Bucket(limit, bucket.margin, since=float("-inf"))
            period = max(period, empty.span * count / max(empty.share(0.0), 1))
        return period

    def remaining(self) -> int | None:
        """Requests left now in the tightest bucket stock reads count in: as the provider last
        reported it where it reports (and its window is not over), else as counted here over
        the provider's window. None: no stock read sent yet."""
        now = self.clock()
        left: list[int] = []
        for key in self.read_buckets:
            bucket = self.buckets.get(key)
            if bucket is None:
                continue
            reported = self.headroom.reported(key) if self.headroom is not None else None
            if reported is not None and reported[1] > now:
                left.append(reported[0])
                continue
            left.append(bucket.limit.requests - bucket.used(now))
        return max(min(left), 0) if left else None

    def rates(self) -> dict[str, tuple[float, float, float]]:
        """Per bucket stock reads count against: (limit, planned, used) requests per minute.
        Planned is what the plan lets the bucket carry now: everything else sent, plus the
        reads' share."""
        now = self.clock()
        shown = {}
        for key in sorted(self.read_buckets):
            bucket = self.buckets.get(key)
            if bucket is None:
                continue
            bucket.forget_before(now)
            per_minute = 60.0 / bucket.limit.seconds
            others = sum(1 for _, stock in bucket.sent if not stock)
            planned = others + max(bucket.share(now), 0)
            shown[key] = (
                bucket.limit.requests * per_minute,
                planned * 60.0 / bucket.span,
                bucket.used(now) * per_minute,
            )
        return shown
