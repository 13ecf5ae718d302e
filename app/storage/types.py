"""Column types that behave the same on SQLite and PostgreSQL."""

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import BigInteger, DateTime, Dialect
from sqlalchemy.types import TypeDecorator

MICROS_PER_DOLLAR = 1_000_000


class Money(TypeDecorator[Decimal]):
    """USD as an exact integer count of micro-dollars, read back as Decimal.

    SQLite has no exact decimal type (NUMERIC columns round-trip through float), so money is
    stored as an integer on both databases; sums and comparisons in SQL stay exact.
    """

    impl = BigInteger
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> int | None:
        if value is None:
            return None
        micros = Decimal(value) * MICROS_PER_DOLLAR
        if micros != micros.to_integral_value():
            raise ValueError(f"{value} has more precision than a micro-dollar")
        return int(micros)

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        if value is None:
            return None
        return Decimal(int(value)) / MICROS_PER_DOLLAR


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC in Python, whatever the database keeps."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime, got {type(value).__name__}")
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; attach a timezone")
        moment: datetime = value.astimezone(UTC)
        return moment.replace(tzinfo=None) if dialect.name == "sqlite" else moment

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        moment: datetime = value
        if moment.tzinfo is None:
            return moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)
