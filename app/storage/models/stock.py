"""What the providers show: the latest read of each, balances, and the stock history."""

from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    Index,
    Integer,
    LargeBinary,
    String,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.storage.models.base import Base
from app.storage.types import Money, UTCDateTime


class OfferSnapshot(Base):
    """The latest stock read of one provider, so any replica can show it."""

    __tablename__ = "offer_snapshots"

    provider: Mapped[str] = mapped_column(String(20), primary_key=True)
    offers: Mapped[Any] = mapped_column(JSON)  # from the last successful read
    fetched_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # last successful read
    checked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # last read attempted
    error: Mapped[str | None] = mapped_column(String(500))  # what went wrong with it, if so
    # Requests left in the tightest rate-limit bucket stock reads count in, when written.
    rate_limit_remaining: Mapped[int | None] = mapped_column(Integer)


class ProviderBalance(Base):
    """Our account balance at one provider as last read, so any replica can show it."""

    __tablename__ = "provider_balances"

    provider: Mapped[str] = mapped_column(String(20), primary_key=True)
    amount: Mapped[Decimal | None] = mapped_column(Money)  # None: the last read failed
    read_at: Mapped[datetime] = mapped_column(UTCDateTime)
    error: Mapped[str | None] = mapped_column(String(500))


class ProviderImages(Base):
    """The OS images a provider's creates may name, as last read, so any replica can check an
    order's image against them when it is placed."""

    __tablename__ = "provider_images"

    provider: Mapped[str] = mapped_column(String(20), primary_key=True)
    machines: Mapped[Any] = mapped_column(JSON)  # every name or id a single machine boots
    clusters: Mapped[Any] = mapped_column(JSON)  # those a cluster's nodes boot
    # Each image with its driver, and which run each machine (`services/images.py`); null in
    # a list read before either was kept.
    fits: Mapped[Any | None] = mapped_column(JSON)
    read_at: Mapped[datetime] = mapped_column(UTCDateTime)


class StoredForecast(Base):
    """What a provider last said it plans to have of one of its GPU models in one region (the
    provider's word, not ours), rewritten only when what it says changes."""

    __tablename__ = "stock_forecasts"

    provider: Mapped[str] = mapped_column(String(20), primary_key=True)
    region: Mapped[str] = mapped_column(String(64), primary_key=True)
    provider_model: Mapped[str] = mapped_column(String(64), primary_key=True)  # its GPU name
    gpu_model: Mapped[str] = mapped_column(String(40))  # the catalogue's
    interconnect: Mapped[str | None] = mapped_column(String(20))
    within_7_days: Mapped[str | None] = mapped_column(String(40))  # as the provider wrote it
    within_30_days: Mapped[str | None] = mapped_column(String(40))
    changed_at: Mapped[datetime] = mapped_column(UTCDateTime)  # the first read that said it so


_OPEN_INTERVAL = text("gone_at IS NULL")
_ONE = text("1")
_OPEN_WINDOW = text("ended_at IS NULL")


class StockInterval(Base):
    """One appearance of one offer (provider, region, SKU) at one price: from the first read
    that saw it to the last, and the first read that saw it gone (None while it is in stock).
    A price change closes one interval and opens the next.

    The machine is its GPU model, GPUs per node and nodes: what is read for "8x B200" never
    counts a cluster of two such machines, nor the reverse."""

    __tablename__ = "stock_intervals"
    __table_args__ = (
        Index(
            "ix_stock_intervals_machine_first_seen",
            "gpu_model",
            "gpu_count",
            "nodes",
            "first_seen_at",
        ),
        Index("ix_stock_intervals_last_seen", "last_seen_at"),
        # One open interval per offer key: a second writer cannot open a twin.
        Index(
            "uq_stock_intervals_open_offer",
            "provider",
            "region",
            "sku",
            unique=True,
            sqlite_where=_OPEN_INTERVAL,
            postgresql_where=_OPEN_INTERVAL,
        ),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    provider: Mapped[str] = mapped_column(String(20))
    region: Mapped[str] = mapped_column(String(64))
    sku: Mapped[str] = mapped_column(String(128))
    gpu_model: Mapped[str] = mapped_column(String(40))
    gpu_count: Mapped[int] = mapped_column(Integer)  # per node
    nodes: Mapped[int] = mapped_column(Integer, default=1, server_default=_ONE)
    interconnect: Mapped[str | None] = mapped_column(String(20))
    cluster_interconnect: Mapped[str | None] = mapped_column(String(20))  # between its nodes
    disk_gb: Mapped[int | None] = mapped_column(Integer)
    disk_fixed: Mapped[bool] = mapped_column(Boolean, default=False)
    price_per_hour: Mapped[Decimal] = mapped_column(Money)  # the provider's, all its nodes
    fee_percent: Mapped[Decimal] = mapped_column(Money)  # the fees in force when it was seen
    fee_flat_per_hour: Mapped[Decimal] = mapped_column(Money)
    price_per_hour_with_fees: Mapped[Decimal] = mapped_column(Money)
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime)
    gone_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    max_available: Mapped[int | None] = mapped_column(Integer)  # None: "in stock", no count
    generated: Mapped[bool] = mapped_column(Boolean, default=False)  # demo-history, not seen


class StockCoverage(Base):
    """A span of time during which one provider's stock was read at about one period, so that
    "not in stock" is never confused with "not looking". Open (ended_at None) while reading."""

    __tablename__ = "stock_coverage"
    __table_args__ = (
        Index("ix_stock_coverage_provider_started", "provider", "started_at"),
        Index(
            "uq_stock_coverage_open_provider",
            "provider",
            unique=True,
            sqlite_where=_OPEN_WINDOW,
            postgresql_where=_OPEN_WINDOW,
        ),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    provider: Mapped[str] = mapped_column(String(20))
    period_seconds: Mapped[float] = mapped_column(Float)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)  # the first read of the span
    last_read_at: Mapped[datetime] = mapped_column(UTCDateTime)  # the latest read of the span
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    generated: Mapped[bool] = mapped_column(Boolean, default=False)


class StockDay(Base):
    """One offer key's closed stock on one UTC day, derived from its closed intervals so that a
    30- or 90-day summary reads a row per key and day instead of one per appearance.

    `spans` packs, for each closed interval, the part of it that falls on the day as three
    little-endian float64s: start and end (epoch seconds) and the provider's price in
    micro-dollars (exact: integers under 2**53). Written in the transaction that closes the
    intervals, so a closed interval is in exactly one set of day rows (`app/stock/days.py`).
    """

    __tablename__ = "stock_days"
    __table_args__ = (Index("ix_stock_days_machine_day", "gpu_model", "gpu_count", "nodes", "day"),)

    provider: Mapped[str] = mapped_column(String(20), primary_key=True)
    region: Mapped[str] = mapped_column(String(64), primary_key=True)
    sku: Mapped[str] = mapped_column(String(128), primary_key=True)
    day: Mapped[int] = mapped_column(Integer, primary_key=True)  # days since 1970-01-01 (UTC)
    generated: Mapped[bool] = mapped_column(Boolean, primary_key=True)  # demo-history rows
    gpu_model: Mapped[str] = mapped_column(String(40))
    gpu_count: Mapped[int] = mapped_column(Integer)  # per node
    nodes: Mapped[int] = mapped_column(Integer, default=1, server_default=_ONE)
    interconnect: Mapped[str | None] = mapped_column(String(20))
    cluster_interconnect: Mapped[str | None] = mapped_column(String(20))
    disk_gb: Mapped[int | None] = mapped_column(Integer)
    disk_fixed: Mapped[bool] = mapped_column(Boolean)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime)  # of its intervals, the latest
    spans: Mapped[bytes] = mapped_column(LargeBinary)
