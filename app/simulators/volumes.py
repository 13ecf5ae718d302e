"""Storage volumes as a simulated provider keeps them apart from its machines: each billed by
the GB-second from when its machine starts billing until it is deleted for good, whatever
happened to the machine. `GET /<provider>/_sim/volumes` lists them, deleted ones too.

Verda makes an OS volume with each instance and a shared volume with each cluster; a delete may
leave them detached (still billing) or in its trash for 96 hours (billing too, as far as we can
tell: Verda says only that the trash counts against the storage quota). Providers whose disks
go with their VMs (Hyperstack, QuantaCloud) keep none.
"""

import time
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from app.simulators.billing import BillingPolicy, Span

TRASH_SECONDS = 96 * 3600.0  # Verda empties its trash after 96 hours
PER_SECOND = BillingPolicy(block_seconds=1.0, refund_unused=True)
ATTACHED, DETACHED, TRASH, DELETED = "attached", "detached", "trash", "deleted"


@dataclass
class SimVolume:
    """One volume: where it is attached, and when it bills (simulator clock seconds)."""

    id: str
    name: str
    type: str
    size_gb: int
    location: str
    price_per_gb_hour: Decimal
    billed_from: float
    created_at: float = field(default_factory=time.time)  # Unix seconds
    vm_id: str | None = None
    cluster_id: str | None = None
    is_os_volume: bool = False
    tags: list[dict[str, Any]] = field(default_factory=list)
    status: str = ATTACHED
    trashed_at: float | None = None
    trashed_unix: float | None = None  # the same moment in Unix seconds, for the API
    deleted_at: float | None = None  # deleted for good: billing stops
    charged: Decimal = Decimal(0)

    @property
    def hourly_price(self) -> Decimal:
        """What it bills per hour while it exists."""
        return self.price_per_gb_hour * self.size_gb

    def span(self) -> Span:
        """When it bills: until deleted for good, or until its time in the trash is up."""
        end = self.deleted_at
        if end is None and self.status == TRASH and self.trashed_at is not None:
            end = self.trashed_at + TRASH_SECONDS
        return Span(self.billed_from, end)

    def detach(self) -> None:
        """Its machine went; it stays, billing."""
        if self.status == ATTACHED:
            self.status = DETACHED

    def delete(self, now: float, *, permanently: bool) -> None:
        """Into the trash, or gone for good (from the trash too)."""
        if self.status == DELETED:
            return
        if permanently:
            self.status, self.deleted_at = DELETED, now
        elif self.status != TRASH:
            self.status, self.trashed_at, self.trashed_unix = TRASH, now, time.time()

    def empty_trash(self, now: float) -> None:
        """The trash is emptied 96 hours after the volume went in."""
        if self.status == TRASH and self.trashed_at is not None:
            due = self.trashed_at + TRASH_SECONDS
            if due <= now:
                self.status, self.deleted_at = DELETED, due

    def describe(self) -> dict[str, Any]:
        """The control API's view (`GET /_sim/volumes`)."""
        return {
            "id": self.id,
            "name": self.name,
            "type": self.type,
            "size_gb": self.size_gb,
            "status": self.status,
            "hourly_price": "0" if self.status == DELETED else str(self.hourly_price),
            "charged": str(self.charged),
            "vm_id": self.vm_id,
            "cluster_id": self.cluster_id,
            "is_os_volume": self.is_os_volume,
            "tags": [t["key"] if t.get("value") is None else f"{t['key']}={t['value']}"
                     for t in self.tags],
        }  # fmt: skip


def new_volume(
    *,
    name: str,
    kind: str,
    size_gb: int,
    location: str,
    price_per_gb_hour: Decimal,
    billed_from: float,
    tags: list[dict[str, Any]] | None = None,
    **owner: Any,
) -> SimVolume:
    """A volume made now, attached to `vm_id` or `cluster_id` (in `owner`)."""
    return SimVolume(
        id=str(uuid.uuid4()),
        name=name,
        type=kind,
        size_gb=size_gb,
        location=location,
        price_per_gb_hour=price_per_gb_hour,
        billed_from=billed_from,
        tags=list(tags or []),
        **owner,
    )
