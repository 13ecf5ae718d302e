"""Closed stock by offer key and UTC day, as `stock_days` rows keep it: pure (no I/O).

A closed interval [first seen, gone] is cut at each UTC midnight; each piece goes to its day's
row with the provider's price. Pieces of one interval touch end to start, so joining touching
spans (`stock_stats.union`) puts the appearance back together exactly.
"""

from datetime import datetime
from decimal import Decimal

import numpy as np
import numpy.typing as npt

DAY_SECONDS = 86_400
_PACKED = np.dtype("<f8")  # start, end, price in micro-dollars: three per piece
_MICROS = Decimal(1_000_000)

Pieces = npt.NDArray[np.float64]  # shape (n, 3): start, end, price micro-dollars


def day_of(moment: datetime) -> int:
    """The UTC day a moment falls on, as days since 1970-01-01."""
    return int(moment.timestamp() // DAY_SECONDS)


def cut(start: datetime, end: datetime) -> list[tuple[int, float, float]]:
    """(day, start, end) for each UTC day [start, end] spends time on; none when it is empty."""
    lo, hi = start.timestamp(), end.timestamp()
    pieces: list[tuple[int, float, float]] = []
    day = int(lo // DAY_SECONDS)
    while lo < hi:
        midnight = float((day + 1) * DAY_SECONDS)
        pieces.append((day, lo, min(hi, midnight)))
        lo, day = midnight, day + 1
    return pieces


def micros(price: Decimal) -> float:
    """A price as the float64 micro-dollar count the rows keep (exact below 2**53)."""
    return float(int(price * _MICROS))


def dollars(price_micros: float) -> Decimal:
    """The price a packed micro-dollar count stands for."""
    return Decimal(int(price_micros)) / _MICROS


def encode(pieces: npt.ArrayLike) -> bytes:
    """Pack (start, end, price micro-dollars) triples for a `stock_days.spans` column."""
    return np.asarray(pieces, dtype=_PACKED).reshape(-1, 3).tobytes()


def decode(packed: bytes) -> Pieces:
    """The (start, end, price micro-dollars) rows of a `stock_days.spans` column."""
    return np.frombuffer(packed, dtype=_PACKED).reshape(-1, 3).astype(np.float64)
