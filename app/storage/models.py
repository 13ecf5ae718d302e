"""The database tables, as SQLAlchemy ORM models."""

from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from app.core.clock import utcnow
from app.core.states import (
    OPEN_DEPLOYMENTS,
    VM_OWNING_DEPLOYMENTS,
    DeliveryStatus,
    DeploymentStatus,
    HoldStatus,
    OrderEventKind,
    OrderStatus,
    TerminateReason,
    WebhookFormat,
)
from app.storage.types import Money, UTCDateTime


class Base(DeclarativeBase):
    """Declarative base with a naming convention so migrations name constraints predictably."""

    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(column_0_label)s",
            "uq": "uq_%(table_name)s_%(column_0_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


def _states(enum: type[StrEnum], name: str) -> Enum:
    """A column of one of `enum`'s values: VARCHAR with a CHECK on both databases."""
    return Enum(
        enum,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=20 if name != "order_event_kind" else 40,
        values_callable=lambda members: [m.value for m in members],
        validate_strings=True,
    )


class AdminKey(Base):
    """The generated admin API key (only its hash), used when no key is set in settings."""

    __tablename__ = "admin_keys"

    # Always 1: the primary key makes a second generated key impossible, even when two
    # replicas start at once on an empty database.
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Account(Base):
    """A customer: an API key, a balance and the part of it held for creates in flight."""

    __tablename__ = "accounts"
    __table_args__ = (
        CheckConstraint("balance >= 0", name="balance_not_negative"),
        CheckConstraint("held >= 0 AND held <= balance", name="held_within_balance"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    api_key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    balance: Mapped[Decimal] = mapped_column(Money, default=Decimal(0))
    held: Mapped[Decimal] = mapped_column(Money, default=Decimal(0))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Set by every balance change, so the watcher can re-read only accounts that changed.
    updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=utcnow, index=True)
    # Since when its runway (available / hourly spend) is below the low-balance threshold; one
    # `account.low_balance` event per crossing. None: above it (or nothing runs).
    low_balance_since: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Hold(Base):
    """Balance reserved for one hour of a machine while its create call is in flight."""

    __tablename__ = "holds"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"), index=True)
    order_id: Mapped[str | None] = mapped_column(ForeignKey("orders.id"), index=True)
    amount: Mapped[Decimal] = mapped_column(Money)
    status: Mapped[HoldStatus] = mapped_column(
        _states(HoldStatus, "hold_status"), default=HoldStatus.OPEN
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


_BILLED_HOUR = text("billing_hour IS NOT NULL")
_REFUND_OF_ATTEMPT = text("deployment_id IS NOT NULL AND kind = 'refund'")


class LedgerEntry(Base):
    """One movement of money on an account; amounts are positive, `kind` gives the direction."""

    __tablename__ = "ledger_entries"
    __table_args__ = (
        Index("ix_ledger_entries_account_id_id", "account_id", "id"),
        # Money rules: a machine's billing hour is paid once, and what it did not use comes
        # back once, whatever crashes and replicas do.
        Index(
            "uq_ledger_entries_billed_hour",
            "deployment_id",
            "billing_hour",
            unique=True,
            sqlite_where=_BILLED_HOUR,
            postgresql_where=_BILLED_HOUR,
        ),
        Index(
            "uq_ledger_entries_attempt_refund",
            "deployment_id",
            unique=True,
            sqlite_where=_REFUND_OF_ATTEMPT,
            postgresql_where=_REFUND_OF_ATTEMPT,
        ),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"))
    kind: Mapped[str] = mapped_column(String(20))
    amount: Mapped[Decimal] = mapped_column(Money)
    balance_after: Mapped[Decimal] = mapped_column(Money)
    held_after: Mapped[Decimal] = mapped_column(Money)
    hold_id: Mapped[str | None] = mapped_column(ForeignKey("holds.id"))
    order_id: Mapped[str | None] = mapped_column(ForeignKey("orders.id"))
    # The create attempt (machine) a debit or refund is for, and which of its billing hours a
    # debit pays (1 is paid at deploy).
    deployment_id: Mapped[str | None] = mapped_column(ForeignKey("deployments.id"))
    billing_hour: Mapped[int | None] = mapped_column(Integer)
    note: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Order(Base):
    """A standing request for one GPU machine at or below a price."""

    __tablename__ = "orders"
    __table_args__ = (
        Index("ix_orders_account_id_id", "account_id", "id"),
        Index("ix_orders_status_created_at", "status", "created_at"),
        Index("ix_orders_updated_at", "updated_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"))
    name: Mapped[str | None] = mapped_column(String(100))
    status: Mapped[OrderStatus] = mapped_column(
        _states(OrderStatus, "order_status"), default=OrderStatus.WAITING
    )
    gpu_model: Mapped[str] = mapped_column(String(40))
    gpu_count: Mapped[int] = mapped_column(Integer)
    providers: Mapped[list[str]] = mapped_column(JSON)
    # Those of `providers` this service had no credentials for when it last looked; None: none.
    disabled_providers: Mapped[list[str] | None] = mapped_column(JSON)
    max_price_per_hour: Mapped[Decimal] = mapped_column(Money)
    regions: Mapped[list[str] | None] = mapped_column(JSON)
    min_disk_gb: Mapped[int | None] = mapped_column(Integer)
    interconnect: Mapped[str | None] = mapped_column(String(20))
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    ssh_public_key: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # create attempts so far
    # Limits the owner set (changeable while it runs): terminate after this many billed hours
    # running, or before an hour would take what it was charged past this total.
    max_runtime_hours: Mapped[Decimal | None] = mapped_column(Money)
    max_total_usd: Mapped[Decimal | None] = mapped_column(Money)
    terminate_reason: Mapped[TerminateReason | None] = mapped_column(
        _states(TerminateReason, "terminate_reason")
    )
    terminate_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


# Partial indexes: the publisher finds the few lines not yet published among all of them.
_UNPUBLISHED: dict[str, Any] = {
    "sqlite_where": text("NOT published"),
    "postgresql_where": text("NOT published"),
}


class OrderEvent(Base):
    """One line of an order's timeline: what happened, in a sentence a person can read."""

    __tablename__ = "order_events"
    __table_args__ = (
        Index("ix_order_events_order_id_id", "order_id", "id"),
        Index("ix_order_events_unpublished", "id", **_UNPUBLISHED),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    order_id: Mapped[str] = mapped_column(ForeignKey("orders.id"))
    kind: Mapped[OrderEventKind] = mapped_column(_states(OrderEventKind, "order_event_kind"))
    message: Mapped[str] = mapped_column(String(1000))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Copied to the event stream yet (see PublishedEvent)? Written false, set by the publisher.
    published: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))


def _status_in(statuses: tuple[DeploymentStatus, ...]) -> str:
    return "status IN ({})".format(", ".join(f"'{s}'" for s in statuses))


_ONE_OPEN_PER_SERIAL_KIND = text(f"serial_kind IS NOT NULL AND {_status_in(OPEN_DEPLOYMENTS)}")
_ONE_OWNER_PER_VM = text(f"provider_vm_id IS NOT NULL AND {_status_in(VM_OWNING_DEPLOYMENTS)}")


class Deployment(Base):
    """One attempt to create a VM for an order, with the deterministic name it was sent with."""

    __tablename__ = "deployments"
    __table_args__ = (
        UniqueConstraint("order_id", "attempt"),
        Index("ix_deployments_status", "status"),
        # Money rule: a VM belongs to one order. A second live attempt recording a VM another
        # already owns is refused, and the code reads the refusal as "not this attempt's VM".
        Index(
            "uq_deployments_live_provider_vm",
            "provider",
            "provider_vm_id",
            unique=True,
            sqlite_where=_ONE_OWNER_PER_VM,
            postgresql_where=_ONE_OWNER_PER_VM,
        ),
        # At a provider that cannot name a VM, an unclear create can only be told apart from
        # another of the same kind if the two never overlap: one open attempt per kind.
        Index(
            "uq_deployments_open_serial_kind",
            "provider",
            "serial_kind",
            unique=True,
            sqlite_where=_ONE_OPEN_PER_SERIAL_KIND,
            postgresql_where=_ONE_OPEN_PER_SERIAL_KIND,
        ),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    order_id: Mapped[str] = mapped_column(ForeignKey("orders.id"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    provider: Mapped[str] = mapped_column(String(20))
    region: Mapped[str] = mapped_column(String(64))
    instance_type: Mapped[str] = mapped_column(String(128))
    gpu_model: Mapped[str] = mapped_column(String(40), default="")
    gpu_count: Mapped[int] = mapped_column(Integer, default=0)
    offer_id: Mapped[str | None] = mapped_column(String(128))
    vm_name: Mapped[str] = mapped_column(String(64))
    tag: Mapped[str] = mapped_column(String(64), default="")
    # `<region>/<sku>`, set only at providers that cannot name a VM (QuantaCloud): see the index.
    serial_kind: Mapped[str | None] = mapped_column(String(200))
    provider_vm_id: Mapped[str | None] = mapped_column(String(128))
    provider_status: Mapped[str | None] = mapped_column(String(40))
    price_per_hour: Mapped[Decimal] = mapped_column(Money)
    price_per_hour_with_fees: Mapped[Decimal] = mapped_column(Money)
    ip: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[DeploymentStatus] = mapped_column(_states(DeploymentStatus, "deployment_status"))
    detail: Mapped[str | None] = mapped_column(String(500))
    hold_id: Mapped[str | None] = mapped_column(ForeignKey("holds.id"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    running_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Paying as it runs (app/core/metering.py): hours are counted from `billed_from`, each
    # `billing_hour_seconds` long (fixed at the claim); `paid_hours` of them are paid, and
    # `charged` is what its order paid for it so far (debits less refunds, as the ledger has it).
    billing_hour_seconds: Mapped[float] = mapped_column(Float, default=3600.0)
    billed_from: Mapped[datetime | None] = mapped_column(UTCDateTime)
    paid_hours: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    charged: Mapped[Decimal] = mapped_column(Money, default=Decimal(0), server_default=text("0"))
    # The start of an hour that could not be paid: the grace runs from here.
    unpaid_since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # When it stopped billing: our delete was accepted, or the provider was seen to end it.
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Terminating: deletes sent so far without the provider showing it gone, and the next one.
    delete_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    next_delete_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


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


_OPEN_INTERVAL = text("gone_at IS NULL")
_OPEN_WINDOW = text("ended_at IS NULL")


class StockInterval(Base):
    """One appearance of one offer (provider, region, SKU) at one price: from the first read
    that saw it to the last, and the first read that saw it gone (None while it is in stock).
    A price change closes one interval and opens the next."""

    __tablename__ = "stock_intervals"
    __table_args__ = (
        Index("ix_stock_intervals_machine_first_seen", "gpu_model", "gpu_count", "first_seen_at"),
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
    gpu_count: Mapped[int] = mapped_column(Integer)
    interconnect: Mapped[str | None] = mapped_column(String(20))
    disk_gb: Mapped[int | None] = mapped_column(Integer)
    disk_fixed: Mapped[bool] = mapped_column(Boolean, default=False)
    price_per_hour: Mapped[Decimal] = mapped_column(Money)  # the provider's
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
    __table_args__ = (Index("ix_stock_days_machine_day", "gpu_model", "gpu_count", "day"),)

    provider: Mapped[str] = mapped_column(String(20), primary_key=True)
    region: Mapped[str] = mapped_column(String(64), primary_key=True)
    sku: Mapped[str] = mapped_column(String(128), primary_key=True)
    day: Mapped[int] = mapped_column(Integer, primary_key=True)  # days since 1970-01-01 (UTC)
    generated: Mapped[bool] = mapped_column(Boolean, primary_key=True)  # demo-history rows
    gpu_model: Mapped[str] = mapped_column(String(40))
    gpu_count: Mapped[int] = mapped_column(Integer)
    interconnect: Mapped[str | None] = mapped_column(String(20))
    disk_gb: Mapped[int | None] = mapped_column(Integer)
    disk_fixed: Mapped[bool] = mapped_column(Boolean)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime)  # of its intervals, the latest
    spans: Mapped[bytes] = mapped_column(LargeBinary)


class IdempotencyKey(Base):
    """The stored outcome of a POST made with an Idempotency-Key, replayed for 24 hours."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("principal", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    principal: Mapped[str] = mapped_column(String(64))  # an account id, or "admin"
    key: Mapped[str] = mapped_column(String(255))
    request_method: Mapped[str] = mapped_column(String(10))
    request_path: Mapped[str] = mapped_column(String(200))
    request_hash: Mapped[str] = mapped_column(String(64))
    response_status: Mapped[int] = mapped_column(Integer)
    response_body: Mapped[Any] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class Lease(Base):
    """A named lease one process holds at a time (the watcher's leadership among replicas)."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    holder: Mapped[str] = mapped_column(String(200))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)


class AccountEvent(Base):
    """Something that happened to an account outside any order (an endpoint disabled)."""

    __tablename__ = "account_events"
    __table_args__ = (
        Index("ix_account_events_account_id_id", "account_id", "id"),
        Index("ix_account_events_unpublished", "id", **_UNPUBLISHED),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"))
    kind: Mapped[str] = mapped_column(String(40))
    message: Mapped[str] = mapped_column(String(1000))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    published: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))


class PublishedEvent(Base):
    """The event stream: order timeline lines and account events, numbered in commit order.

    Only the publisher writes here, one transaction at a time (an advisory lock on
    PostgreSQL, the single writer on SQLite), so a larger id is never committed before a
    smaller one: a reader that has seen id N has seen everything up to N, and `Last-Event-ID`
    resumes without a gap. AUTOINCREMENT keeps SQLite from reusing ids after a prune.
    """

    __tablename__ = "published_events"
    __table_args__ = (
        Index("ix_published_events_account_id_id", "account_id", "id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"))
    order_id: Mapped[str | None] = mapped_column(ForeignKey("orders.id"))
    type: Mapped[str] = mapped_column(String(60))
    source_id: Mapped[str] = mapped_column(String(40), unique=True)  # the line it copies
    payload: Mapped[str] = mapped_column(Text)  # the exact JSON every reader is sent
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)  # when it happened
    published_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WebhookEndpoint(Base):
    """A URL an account wants order events POSTed to, with its signing secret (encrypted)."""

    __tablename__ = "webhook_endpoints"
    __table_args__ = (Index("ix_webhook_endpoints_account_id_id", "account_id", "id"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"))
    url: Mapped[str] = mapped_column(String(2048))
    description: Mapped[str | None] = mapped_column(String(500))
    events: Mapped[list[str] | None] = mapped_column(JSON)  # None: every event type
    format: Mapped[WebhookFormat] = mapped_column(
        _states(WebhookFormat, "webhook_format"),
        default=WebhookFormat.STANDARD,
        server_default=WebhookFormat.STANDARD.value,
    )
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    disabled_reason: Mapped[str | None] = mapped_column(String(500))
    secret: Mapped[str] = mapped_column(Text)
    # After a rotation the old secret keeps signing alongside the new one until this time.
    previous_secret: Mapped[str | None] = mapped_column(Text)
    previous_secret_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    failing_since: Mapped[datetime | None] = mapped_column(UTCDateTime)  # no success since
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WebhookEvent(Base):
    """The outbox: one event, written in the transaction of the change it reports."""

    __tablename__ = "webhook_events"
    __table_args__ = (Index("ix_webhook_events_account_id_id", "account_id", "id"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # the webhook-id header
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"))
    order_id: Mapped[str | None] = mapped_column(ForeignKey("orders.id"))
    type: Mapped[str] = mapped_column(String(40))
    payload: Mapped[str] = mapped_column(Text)  # the exact body every delivery signs and sends
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WebhookDelivery(Base):
    """One event on its way to one endpoint: the retry schedule's position and its lease."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        UniqueConstraint("event_id", "endpoint_id"),
        Index("ix_webhook_deliveries_status_next_attempt_at", "status", "next_attempt_at"),
        Index("ix_webhook_deliveries_endpoint_id_id", "endpoint_id", "id"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    event_id: Mapped[str] = mapped_column(ForeignKey("webhook_events.id"))
    endpoint_id: Mapped[str] = mapped_column(ForeignKey("webhook_endpoints.id"))
    status: Mapped[DeliveryStatus] = mapped_column(
        _states(DeliveryStatus, "delivery_status"), default=DeliveryStatus.PENDING
    )
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # since created or redelivered
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # A dispatcher sending it holds the lease; an expired lease means it died mid-send.
    lease_token: Mapped[str | None] = mapped_column(String(40))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WebhookAttempt(Base):
    """One HTTP request of a delivery and what came back."""

    __tablename__ = "webhook_attempts"
    __table_args__ = (Index("ix_webhook_attempts_delivery_id_id", "delivery_id", "id"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    delivery_id: Mapped[str] = mapped_column(ForeignKey("webhook_deliveries.id"))
    attempted_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    status_code: Mapped[int | None] = mapped_column(Integer)
    duration_ms: Mapped[int] = mapped_column(Integer)
    response_body: Mapped[str | None] = mapped_column(Text)  # the first 2,048 characters
    error: Mapped[str | None] = mapped_column(String(500))
