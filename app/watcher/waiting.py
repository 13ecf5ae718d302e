"""The waiting orders and their accounts' available balance, read into memory for the matcher."""

from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.catalogue import Interconnect
from app.models import Account, Order, OrderStatus
from app.watcher.match import OrderWants


@dataclass
class WaitingSnapshot:
    """Every waiting order as the matcher sees it, and each account's available balance."""

    orders: list[OrderWants] = field(default_factory=list)
    funds: dict[str, Decimal] = field(default_factory=dict)

    @cached_property
    def providers(self) -> frozenset[str]:
        """Providers that at least one waiting order accepts."""
        return frozenset(p for order in self.orders for p in order.providers)

    def without(self, order_ids: set[str]) -> "WaitingSnapshot":
        """The same snapshot minus orders that were just claimed."""
        kept = [o for o in self.orders if o.id not in order_ids]
        return WaitingSnapshot(kept, self.funds)


async def load_waiting(session: AsyncSession) -> WaitingSnapshot:
    """Read every waiting order (one query; the index on status keeps it cheap)."""
    statement = (
        select(Order, Account.balance, Account.held)
        .join(Account, Account.id == Order.account_id)
        .where(Order.status == OrderStatus.WAITING)
    )
    snapshot = WaitingSnapshot()
    for order, balance, held in (await session.execute(statement)).all():
        snapshot.funds[order.account_id] = balance - held
        snapshot.orders.append(
            OrderWants(
                id=order.id,
                created_at=order.created_at,
                providers=frozenset(order.providers),
                gpu_model=order.gpu_model,
                gpu_count=order.gpu_count,
                max_price_per_hour=order.max_price_per_hour,
                regions=frozenset(r.upper() for r in order.regions) if order.regions else None,
                min_disk_gb=order.min_disk_gb,
                interconnect=Interconnect(order.interconnect) if order.interconnect else None,
                account_id=order.account_id,
            )
        )
    return snapshot
