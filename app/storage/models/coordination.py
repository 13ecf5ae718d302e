"""What replicas share to act once: stored request outcomes and leases."""

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.core.clock import utcnow
from app.storage.models.base import Base
from app.storage.types import UTCDateTime


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
