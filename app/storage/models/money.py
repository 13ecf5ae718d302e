"""Accounts and their money: balances, holds for creates in flight, and the ledger."""

from datetime import datetime
from decimal import Decimal

from sqlalchemy import (
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.core.clock import utcnow
from app.core.states import (
    HoldStatus,
)
from app.storage.models.base import Base, state_column
from app.storage.types import Money, UTCDateTime


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
        state_column(HoldStatus, "hold_status"), default=HoldStatus.OPEN
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
            "attempt_id",
            "billing_hour",
            unique=True,
            sqlite_where=_BILLED_HOUR,
            postgresql_where=_BILLED_HOUR,
        ),
        Index(
            "uq_ledger_entries_attempt_refund",
            "attempt_id",
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
    attempt_id: Mapped[str | None] = mapped_column(
        "deployment_id", ForeignKey("deployments.id"), key="attempt_id"
    )
    billing_hour: Mapped[int | None] = mapped_column(Integer)
    note: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
