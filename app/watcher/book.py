"""The latest offers of every provider, what this process has taken from them, and cool-downs."""

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from app.core.catalogue import Provider
from app.core.clock import utcnow
from app.core.market import OfferKey
from app.providers.base import Offer

# A refused offer rests at least a second (the capacity cool-down may be 0), and at most 15
# minutes: a refusal we cannot read may be a quota that someone lifts.
MIN_REFUSED_REST = 1.0
REFUSED_REST_CAP = 900.0


@dataclass
class ProviderRead:
    """One provider's latest stock read."""

    offers: list[Offer] = field(default_factory=list)
    read_at: float | None = None  # clock seconds of the last successful read
    read_at_wall: datetime | None = None
    error: str | None = None


@dataclass
class Taken:
    """One unit of an offer given to a create: counted against the offer until a read that
    started after the create's answer (and so already reflects it) replaces the offer."""

    key: OfferKey
    answered_at: float | None = None  # clock seconds; None while the create is in flight
    consumed: bool = True


class OfferBook:
    """In-memory view of stock that the matcher works from; no I/O.

    Every age, cool-down and answer time is read from `clock` (monotonic seconds); the
    `started` of a read must come from the same clock, or a unit taken by a create would be
    freed or kept by comparing two clocks.
    """

    def __init__(
        self, *, cooldown_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.cooldown_seconds = cooldown_seconds
        self.clock = clock
        self.reads: dict[Provider, ProviderRead] = {}
        self._taken: list[Taken] = []
        self._cool_until: dict[OfferKey, float] = {}
        self._refusals: dict[OfferKey, int] = {}  # refusals in a row since the last accept
        self._first_seen: dict[OfferKey, float] = {}

    def update(self, provider: Provider, offers: list[Offer], *, started: float) -> None:
        """Replace a provider's offers with a read that began at `started` (on the book's clock)."""
        now = self.clock()
        read = self.reads.setdefault(provider, ProviderRead())
        keys = {o.key for o in offers}
        for key in [k for k in self._first_seen if k[0] == provider and k not in keys]:
            del self._first_seen[key]
        for key in keys:
            self._first_seen.setdefault(key, now)
        self._taken = [
            t
            for t in self._taken
            if t.key[0] != provider
            or (t.consumed and (t.answered_at is None or t.answered_at > started))
        ]
        read.offers, read.read_at, read.read_at_wall, read.error = offers, now, utcnow(), None

    def failed(self, provider: Provider, error: str) -> None:
        """Record that a provider's read failed (its last offers are kept, and age)."""
        self.reads.setdefault(provider, ProviderRead()).error = error

    def current(self, *, max_age: dict[Provider, float]) -> list[Offer]:
        """Offers from reads younger than `max_age`, less what this process has already taken."""
        now = self.clock()
        counts = Counter(t.key for t in self._taken if t.consumed)
        offers = []
        for provider, read in self.reads.items():
            if read.read_at is None or now - read.read_at > max_age.get(provider, 0):
                continue
            for offer in read.offers:
                taken = counts.get(offer.key, 0)
                if not taken:
                    offers.append(offer)
                elif offer.available is not None and offer.available > taken:
                    offers.append(replace(offer, available=offer.available - taken))
        return offers

    def take(self, key: OfferKey) -> Taken:
        """One unit of this offer went to a create: not handed out again until a read shows
        the provider's stock after that create; call `answered` when the create is answered."""
        taken = Taken(key)
        self._taken.append(taken)
        return taken

    def answered(self, taken: Taken, *, consumed: bool) -> None:
        """The create for `taken` got its answer; `consumed`: it may have used the unit."""
        taken.answered_at = self.clock()
        taken.consumed = consumed

    def cool(self, key: OfferKey, seconds: float | None = None) -> None:
        """Send nothing to this offer for a while (it just answered with a capacity error)."""
        wait = self.cooldown_seconds if seconds is None else max(seconds, self.cooldown_seconds)
        self._rest(key, wait)

    def refused(self, key: OfferKey) -> float:
        """This offer refused a create without saying why: it rests the cool-down (a second at
        least), twice as long at each refusal in a row, at most `REFUSED_REST_CAP`; the seconds.
        """
        self._refusals[key] = self._refusals.get(key, 0) + 1
        first = max(self.cooldown_seconds, MIN_REFUSED_REST)
        doublings = min(self._refusals[key] - 1, 32)  # past the cap long before; no overflow
        wait = min(first * 2.0**doublings, REFUSED_REST_CAP)
        self._rest(key, wait)
        return wait

    def accepted(self, key: OfferKey) -> None:
        """A create at this offer was accepted: its next refusal rests the shortest again."""
        self._refusals.pop(key, None)

    def _rest(self, key: OfferKey, seconds: float) -> None:
        self._cool_until[key] = max(self._cool_until.get(key, 0.0), self.clock() + seconds)

    def cooling(self) -> frozenset[OfferKey]:
        """Offer keys cooling down now."""
        now = self.clock()
        for key in [k for k, until in self._cool_until.items() if until <= now]:
            del self._cool_until[key]
        return frozenset(self._cool_until)

    def seen_for(self, key: OfferKey) -> float | None:
        """Seconds since this offer was first seen in stock (in its current run), if it is."""
        first = self._first_seen.get(key)
        return None if first is None else self.clock() - first
