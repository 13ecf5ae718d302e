"""What one of Verda's availability lists said is in stock, as (type, location) pairs, less the
pairs a create has been answered for since that list was read: the unit may be gone, and only
a list read begun after the answer says whether it still is."""

import math
from collections.abc import Callable

Pair = tuple[str, str]  # (instance or cluster type, location)


class StockPairs:
    """The last availability list of one kind (instances', clusters'), on `clock`."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.listed: list[Pair] = []  # as the last list said
        self._read_at = -math.inf  # when the last list read was sent
        self._created_at: dict[Pair, float] = {}  # pair -> when a create there was answered

    def started(self) -> float:
        """The time a list read is sent, to hand to `read` with its answer."""
        return self._clock()

    def read(self, pairs: list[Pair], started: float) -> None:
        """A list read sent at `started` answered `pairs`."""
        self.listed = pairs
        self._read_at = started
        self._created_at = {k: at for k, at in self._created_at.items() if at >= started}

    def created(self, pair: Pair) -> None:
        """A create for `pair` was answered (or failed) just now."""
        self._created_at[pair] = self._clock()

    def drop_type(self, sku: str) -> None:
        """Nothing of `sku` is in stock anywhere (a read of that type alone said so)."""
        self.listed = [pair for pair in self.listed if pair[0] != sku]

    def forget(self) -> None:
        """Nothing is in stock as far as we know (the read failed)."""
        self.listed = []

    def current(self) -> list[Pair]:
        """The pairs the last list found, less those a create has been answered for since."""
        return [p for p in self.listed if self._created_at.get(p, -math.inf) < self._read_at]
