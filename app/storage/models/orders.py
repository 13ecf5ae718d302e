"""Orders, their timelines, and their create attempts (each with the VM it made)."""

from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.core.catalogue import ClusterInterconnect
from app.core.clock import utcnow
from app.core.market import MAX_ALTERNATIVES, MAX_NODES
from app.core.states import (
    OPEN_ATTEMPTS,
    VM_OWNING_ATTEMPTS,
    AlternativePreference,
    AttemptStatus,
    NodeLostPolicy,
    OrderEventKind,
    OrderStatus,
    TerminateReason,
)
from app.storage.models.base import UNPUBLISHED, Base, state_column
from app.storage.types import Money, UTCDateTime


class Order(Base):
    """A standing request for one GPU machine at or below a price."""

    __tablename__ = "orders"
    __table_args__ = (
        Index("ix_orders_account_id_id", "account_id", "id"),
        Index("ix_orders_account_id_status", "account_id", "status"),  # the waiting cap
        Index("ix_orders_account_id_created_at", "account_id", "created_at"),  # the rate
        Index("ix_orders_status_created_at", "status", "created_at"),
        Index("ix_orders_updated_at", "updated_at"),
        Index("ix_orders_pruned_at_updated_at", "pruned_at", "updated_at"),  # the retention
        CheckConstraint(f"nodes BETWEEN 1 AND {MAX_NODES}", name="order_nodes"),
    )
    # `alternatives` lists the machines the order may take (one, for most orders); the machine
    # columns (gpu_model ... cluster_interconnect, max_price_per_hour, providers) repeat its
    # first, for the matcher's indexes and queries.

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"))
    name: Mapped[str | None] = mapped_column(String(100))
    status: Mapped[OrderStatus] = mapped_column(
        state_column(OrderStatus, "order_status"), default=OrderStatus.WAITING
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
    # Machines of `gpu_count` GPUs deployed together (1: a single machine); the price and the
    # hold are for all of them.
    nodes: Mapped[int] = mapped_column(Integer, default=1, server_default=text("1"))
    cluster_interconnect: Mapped[ClusterInterconnect | None] = mapped_column(
        state_column(ClusterInterconnect, "order_cluster_interconnect")
    )
    on_node_lost: Mapped[NodeLostPolicy] = mapped_column(
        state_column(NodeLostPolicy, "order_on_node_lost"),
        default=NodeLostPolicy.KEEP,
        server_default=text("'keep'"),
    )
    # Every alternative (`{"gpu_model", "gpu_count", "nodes", "providers",
    # "max_price_per_hour", "regions", ...}`), in the order listed.
    alternatives: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    model: Mapped[str | None] = mapped_column(String(200))  # ordered by model: its id
    # The engine its start-up script serves the model with (`serve`), for its page's tunnel.
    serve_engine: Mapped[str | None] = mapped_column(String(20))
    prefer: Mapped[AlternativePreference] = mapped_column(
        state_column(AlternativePreference, "order_prefer"),
        default=AlternativePreference.CHEAPEST,
        server_default=text("'cheapest'"),
    )
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    ssh_public_key: Mapped[str | None] = mapped_column(Text)
    # A script its machine runs once at boot, sealed like webhook secrets (`SecretBox`, owned
    # by the order's id: it may hold tokens); the API shows only its SHA-256 and size (UTF-8).
    startup_script: Mapped[str | None] = mapped_column(Text)
    startup_script_sha256: Mapped[str | None] = mapped_column(String(64))
    startup_script_bytes: Mapped[int | None] = mapped_column(Integer)
    # The OS image its machine boots, as the provider names it (None: the configured one).
    image: Mapped[str | None] = mapped_column(String(200))
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # create attempts so far
    # Limits the owner set (changeable while it runs): terminate after this many billed hours
    # running, or before an hour would take what it was charged past this total.
    max_runtime_hours: Mapped[Decimal | None] = mapped_column(Money)
    max_total_usd: Mapped[Decimal | None] = mapped_column(Money)
    terminate_reason: Mapped[TerminateReason | None] = mapped_column(
        state_column(TerminateReason, "terminate_reason")
    )
    terminate_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # When its timeline and events were pruned, past the retention (`services/retention.py`):
    # an ended order the ledger names keeps its row.
    pruned_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class OrderEvent(Base):
    """One line of an order's timeline: what happened, in a sentence a person can read."""

    __tablename__ = "order_events"
    __table_args__ = (
        Index("ix_order_events_order_id_id", "order_id", "id"),
        Index("ix_order_events_unpublished", "id", **UNPUBLISHED),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    order_id: Mapped[str] = mapped_column(ForeignKey("orders.id"))
    kind: Mapped[OrderEventKind] = mapped_column(state_column(OrderEventKind, "order_event_kind"))
    message: Mapped[str] = mapped_column(String(1000))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Copied to the event stream yet (see PublishedEvent)? Written false, set by the publisher.
    published: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))


def _status_in(statuses: tuple[AttemptStatus, ...]) -> str:
    return "status IN ({})".format(", ".join(f"'{s}'" for s in statuses))


_ONE_OPEN_PER_SERIAL_KIND = text(f"serial_kind IS NOT NULL AND {_status_in(OPEN_ATTEMPTS)}")
_ONE_OWNER_PER_VM = text(f"provider_vm_id IS NOT NULL AND {_status_in(VM_OWNING_ATTEMPTS)}")


class Attempt(Base):
    """One attempt to create a VM for an order, with the deterministic name it was sent with."""

    __tablename__ = "deployments"
    __table_args__ = (
        UniqueConstraint("order_id", "number"),
        CheckConstraint(
            f"alternative BETWEEN 1 AND {MAX_ALTERNATIVES}", name="deployment_alternative"
        ),
        Index("ix_deployments_status", "status"),
        Index("uq_deployments_report_token", "report_token_sha256", unique=True),
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
    # Its number among its order's attempts (the `attempts` counter when it was claimed).
    number: Mapped[int] = mapped_column("attempt", Integer, key="number")
    provider: Mapped[str] = mapped_column(String(20))
    region: Mapped[str] = mapped_column(String(64))
    # The offer's SKU (Verda's instance type, Hyperstack's flavor); the API shows it as
    # `instance_type`, the column's name.
    sku: Mapped[str] = mapped_column("instance_type", String(128), key="sku")
    gpu_model: Mapped[str] = mapped_column(String(40), default="")
    gpu_count: Mapped[int] = mapped_column(Integer, default=0)  # per node
    nodes: Mapped[int] = mapped_column(Integer, default=1, server_default=text("1"))
    # Which of its order's alternatives the offer was for (1: the first, or the only one).
    alternative: Mapped[int] = mapped_column(Integer, default=1, server_default=text("1"))
    # A cluster's nodes as its provider last reported them (`machine_view`), while it has some.
    machines: Mapped[list[dict[str, str | None]] | None] = mapped_column(JSON)
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
    status: Mapped[AttemptStatus] = mapped_column(state_column(AttemptStatus, "deployment_status"))
    detail: Mapped[str | None] = mapped_column(String(500))
    hold_id: Mapped[str | None] = mapped_column(ForeignKey("holds.id"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # When its status last moved (and, terminating, its last delete). A deployed attempt's is
    # its accepted create, or the look-up that found its VM: its boot deadline runs from there.
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
    # What its machine last reported of itself (`services/machine_reports.py`): the SHA-256 of
    # the token its start-up script was given (the token itself is never kept), the stage, what
    # it said, its download's progress, when it reported, and when it first reported `ready`
    # (and how long its first completion took, as the machine measured it).
    report_token_sha256: Mapped[str | None] = mapped_column(String(64))
    stage: Mapped[str | None] = mapped_column(String(20))
    stage_detail: Mapped[str | None] = mapped_column(String(500))
    progress: Mapped[dict[str, int | float | None] | None] = mapped_column(JSON)
    reported_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    ready_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    time_to_first_token_seconds: Mapped[float | None] = mapped_column(Float)
