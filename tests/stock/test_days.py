"""Cutting closed stock at UTC midnights, and packing the pieces for `stock_days`."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from app.stock.days import DAY_SECONDS, cut, day_of, decode, dollars, encode, micros

NOON = datetime(2026, 12, 1, 12, tzinfo=UTC)


def test_an_interval_within_a_day_is_one_piece() -> None:
    end = NOON + timedelta(hours=1)
    assert cut(NOON, end) == [(day_of(NOON), NOON.timestamp(), end.timestamp())]


def test_an_interval_is_cut_at_each_midnight_into_touching_pieces() -> None:
    end = NOON + timedelta(days=2, hours=1)  # noon to 13:00 two days later
    pieces = cut(NOON, end)
    midnight = (day_of(NOON) + 1) * DAY_SECONDS
    assert [day for day, _, _ in pieces] == [day_of(NOON) + k for k in range(3)]
    assert [(start, stop) for _, start, stop in pieces] == [
        (NOON.timestamp(), midnight),
        (midnight, midnight + DAY_SECONDS),
        (midnight + DAY_SECONDS, end.timestamp()),
    ]


def test_an_interval_ending_at_midnight_leaves_no_empty_piece() -> None:
    midnight = datetime(2026, 12, 2, tzinfo=UTC)
    assert [day for day, _, _ in cut(NOON, midnight)] == [day_of(NOON)]
    assert cut(NOON, NOON) == []


def test_pieces_round_trip_with_exact_prices() -> None:
    prices = [Decimal("0.000001"), Decimal("52.60"), Decimal("123456.789012")]
    pieces = [(1.5, 2.25, micros(p)) for p in prices]
    back = decode(encode(pieces))
    assert back.shape == (3, 3)
    assert [dollars(row[2]) for row in back] == prices
    assert back[:, :2].tolist() == [[1.5, 2.25]] * 3
    assert decode(encode([])).shape == (0, 3)
