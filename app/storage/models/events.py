"""What is told to users: account events, the event stream, and the webhook outbox."""

from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.core.clock import utcnow
from app.core.states import (
    DeliveryStatus,
    WebhookFormat,
)
from app.storage.models.base import UNPUBLISHED, Base, state_column
from app.storage.types import UTCDateTime


class AccountEvent(Base):
    """Something that happened to an account outside any order (an endpoint disabled)."""

    __tablename__ = "account_events"
    __table_args__ = (
        Index("ix_account_events_account_id_id", "account_id", "id"),
        Index("ix_account_events_unpublished", "id", **UNPUBLISHED),
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
    resumes without a gap. AUTOINCREMENT keeps SQLite from reusing ids after a prune. Readers
    are shown `account_seq`, the account's own count (EventCounter), so an id tells nothing of
    other accounts; it grows in the same order.
    """

    __tablename__ = "published_events"
    __table_args__ = (
        Index("ix_published_events_account_id_id", "account_id", "id"),
        UniqueConstraint("account_id", "account_seq", name="uq_published_events_account_seq"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"))
    account_seq: Mapped[int] = mapped_column(BigInteger)  # the id the account's readers see
    order_id: Mapped[str | None] = mapped_column(ForeignKey("orders.id"))
    type: Mapped[str] = mapped_column(String(60))
    source_id: Mapped[str] = mapped_column(String(40), unique=True)  # the line it copies
    payload: Mapped[str] = mapped_column(Text)  # the exact JSON every reader is sent
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)  # when it happened
    published_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class EventCounter(Base):
    """How many events each account has been given: the last `account_seq`, kept when
    events are pruned so an id is never given twice. Only the publisher writes here."""

    __tablename__ = "event_counters"

    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"), primary_key=True)
    last_seq: Mapped[int] = mapped_column(BigInteger)


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
        state_column(WebhookFormat, "webhook_format"),
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
        state_column(DeliveryStatus, "delivery_status"), default=DeliveryStatus.PENDING
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
