"""The waiting orders and their accounts' available balance, kept in memory for the matcher.

A full read at start, then only the rows that changed: orders and accounts carry
`updated_at`, set by every write that matters here, and each refresh reads the rows changed since
the previous one (with an overlap for transactions that committed a little after they stamped
their rows). Every few minutes, as a safety net, every waiting order's (id, updated_at) is
compared with the book's, and only the rows that differ are read again: with 100,000 waiting
orders a full read costs seconds of event-loop time, which the hot path would wait for. Both
read page by page, letting the loop run between pages.
"""

import asyncio
import bisect
import gc
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.clock import utcnow
from app.core.market import MachineKey, OrderWants, all_wants_of
from app.core.states import OrderStatus
from app.providers.registry import abilities
from app.services import waiting_orders

OVERLAP = timedelta(seconds=10)  # > the longest write transaction, and the clock skew
FULL_READ_SECONDS = 300.0  # how often every waiting order is checked against the book
PAGE = 2_000  # rows read between two turns of the event loop


def _age(order: OrderWants) -> tuple[datetime, str, int]:
    return (order.created_at, order.id, order.alternative)


def oldest_first(groups: Sequence[Sequence[OrderWants]]) -> list[OrderWants]:
    """Groups each oldest first, merged into one list oldest first."""
    if len(groups) == 1:
        return list(groups[0])
    return sorted((o for group in groups for o in group), key=_age)


def _rank(order: OrderWants) -> tuple[Decimal, datetime, str, int]:
    """Highest cap on the first hour first, then oldest: the orders an offer's price leaves are a
    prefix."""
    return (-order.first_hour_cap, order.created_at, order.id, order.alternative)


def _negated_cap(order: OrderWants) -> Decimal:
    return -order.first_hour_cap


class WaitingBook:
    """Every waiting order, grouped by machine and oldest first, and each account's funds."""

    def __init__(self) -> None:
        self._clear()
        self._orders_since: datetime | None = None
        self._accounts_since: datetime | None = None
        self._full_read_at = 0.0

    def _clear(self) -> None:
        self.version = 0  # changes whenever an order or a balance in the book does
        # Each waiting order's alternatives (one, for most), each in its machine's group.
        self.orders: dict[str, tuple[OrderWants, ...]] = {}
        self.by_machine: dict[MachineKey, list[OrderWants]] = defaultdict(list)
        # The same alternatives, each machine's ranked by `_rank`.
        self._by_cap: dict[MachineKey, list[OrderWants]] = defaultdict(list)
        self.funds: dict[str, Decimal] = {}
        self._stamps: dict[str, datetime] = {}  # order id -> its updated_at as read
        # provider -> machine -> how many alternatives accepting it want that machine
        self._wanted: dict[str, Counter[MachineKey]] = defaultdict(Counter)

    @property
    def providers(self) -> frozenset[str]:
        """Providers that at least one waiting order accepts."""
        return frozenset(p for p, wanted in self._wanted.items() if any(wanted.values()))

    def machines_for(self, provider: str) -> frozenset[MachineKey]:
        """The machines waiting orders that accept `provider` want."""
        wanted = self._wanted.get(provider)
        return frozenset(m for m, n in wanted.items() if n > 0) if wanted else frozenset()

    def candidates(
        self,
        machines: Iterable[MachineKey],
        *,
        at_least: Mapping[MachineKey, Decimal] | None = None,
    ) -> list[OrderWants]:
        """Waiting orders' alternatives for any of these machines, oldest order first (an
        order's alternatives next to each other, in their order). With `at_least`, a machine
        named there gives only the alternatives whose first hour may cost that much."""
        groups = []
        for machine in machines:
            if not self.by_machine.get(machine):
                continue
            floor = None if at_least is None else at_least.get(machine)
            if floor is None:
                groups.append(self.by_machine[machine])
                continue
            ranked = self._by_cap[machine]
            end = bisect.bisect_right(ranked, -floor, key=_negated_cap)
            if end == len(ranked):
                groups.append(self.by_machine[machine])
            elif end:
                groups.append(sorted(ranked[:end], key=_age))
        return oldest_first(groups)

    def groups(self, machines: Iterable[MachineKey]) -> list[list[OrderWants]]:
        """Copies of these machines' groups, each oldest first: safe to read off the loop."""
        return [list(self.by_machine[m]) for m in machines if self.by_machine.get(m)]

    def add(self, alternatives: tuple[OrderWants, ...], stamp: datetime | None = None) -> None:
        """Keep (or replace) a waiting order: its alternatives (one, for most orders), and
        `stamp`, its row's updated_at when it was read."""
        order_id = alternatives[0].id
        if stamp is not None:
            self._stamps[order_id] = stamp
        if self.orders.get(order_id) == alternatives:
            return  # re-read unchanged (the refresh overlaps the previous one)
        self.discard(order_id, keep_stamp=True)
        self.orders[order_id] = alternatives
        self.version += 1
        for order in alternatives:
            group = self.by_machine[order.machine]
            group.insert(bisect.bisect(group, _age(order), key=_age), order)
            ranked = self._by_cap[order.machine]
            ranked.insert(bisect.bisect(ranked, _rank(order), key=_rank), order)
            self._count(order, 1)

    def _count(self, order: OrderWants, change: int) -> None:
        for provider in order.providers:
            self._wanted[provider][order.machine] += change

    def _bulk(self, read: list[tuple[tuple[OrderWants, ...], datetime]]) -> None:
        """Start over with these orders: one sort per machine, not one insert per order."""
        self._clear()
        for alternatives, stamp in read:
            self.orders[alternatives[0].id] = alternatives
            self._stamps[alternatives[0].id] = stamp
            for order in alternatives:
                self.by_machine[order.machine].append(order)
                self._by_cap[order.machine].append(order)
                self._count(order, 1)
        for group in self.by_machine.values():
            group.sort(key=_age)
        for ranked in self._by_cap.values():
            ranked.sort(key=_rank)
        self.version += 1

    def discard(self, order_id: str, *, keep_stamp: bool = False) -> None:
        """Forget an order (claimed, cancelled, expired, ...)."""
        if not keep_stamp:
            self._stamps.pop(order_id, None)
        alternatives = self.orders.pop(order_id, None)
        if alternatives is None:
            return
        self.version += 1
        for order in alternatives:
            group = self.by_machine[order.machine]
            index = bisect.bisect_left(group, _age(order), key=_age)
            if index < len(group) and group[index].id == order_id:
                del group[index]
            ranked = self._by_cap[order.machine]
            index = bisect.bisect_left(ranked, _rank(order), key=_rank)
            if index < len(ranked) and ranked[index].id == order_id:
                del ranked[index]
            self._count(order, -1)

    async def refresh(self, session: AsyncSession) -> None:
        """Bring the book up to date: only what changed, or everything now and then."""
        started = utcnow()
        if self._orders_since is None or time.monotonic() - self._full_read_at > FULL_READ_SECONDS:
            if self._orders_since is None:
                await self._read_everything(session)
            else:
                await self._check_everything(session)
            self._full_read_at = time.monotonic()
            # What the book holds lives for minutes to days. Out of the cyclic collector's
            # sight, a full collection takes milliseconds instead of the 300-700 ms it took
            # with 80,000 orders, all at once, on the loop the hot path runs on. (Reference
            # counting still frees an order's objects once the book lets go of them.)
            gc.freeze()
        else:
            await self._read_changes(session)
        self._orders_since = self._accounts_since = started - OVERLAP

    async def _read_everything(self, session: AsyncSession) -> None:
        able = abilities()
        read: list[tuple[tuple[OrderWants, ...], datetime]] = []
        async for page in waiting_orders.waiting_pages(session, PAGE):
            read.extend((all_wants_of(row, able=able), row.updated_at) for row in page)
            await asyncio.sleep(0)
        funds = await self._funds_of({alts[0].account_id for alts, _ in read}, session)
        self._bulk(read)  # the book and its funds change together, never one without the other
        self.funds = funds

    async def _check_everything(self, session: AsyncSession) -> None:
        """Every waiting order's (id, updated_at) against the book; re-read what differs."""
        waiting: set[str] = set()
        stale = []
        async for page in waiting_orders.waiting_stamps(session, PAGE):
            for order_id, stamp in page:
                waiting.add(order_id)
                if self._stamps.get(order_id) != stamp:
                    stale.append(order_id)
            await asyncio.sleep(0)
        able = abilities()
        rows: list[Any] = []
        for first in range(0, len(stale), PAGE):
            rows.extend(await waiting_orders.waiting_by_id(session, stale[first : first + PAGE]))
        accounts = {alternatives[0].account_id for alternatives in self.orders.values()}
        funds = await self._funds_of(accounts | {row.account_id for row in rows}, session)
        for order_id in [i for i in self.orders if i not in waiting]:
            self.discard(order_id)
        for row in rows:
            self.add(all_wants_of(row, able=able), row.updated_at)
        self.funds = funds
        self.version += 1

    async def _funds_of(self, accounts: set[str], session: AsyncSession) -> dict[str, Decimal]:
        ordered, funds = sorted(accounts), {}
        for first in range(0, len(ordered), PAGE):
            funds.update(await waiting_orders.funds_of(session, set(ordered[first : first + PAGE])))
        return funds

    async def _read_changes(self, session: AsyncSession) -> None:
        assert self._orders_since is not None and self._accounts_since is not None
        unknown_accounts = set()
        able = abilities()
        for row in await waiting_orders.changed_since(session, self._orders_since):
            if row.status == OrderStatus.WAITING:
                self.add(all_wants_of(row, able=able), row.updated_at)
                if row.account_id not in self.funds:
                    unknown_accounts.add(row.account_id)
            else:
                self.discard(row.id)
        changed = await waiting_orders.funds_changed_since(session, self._accounts_since)
        for account_id, available in changed.items():
            if self.funds.get(account_id) != available:
                self.funds[account_id] = available
                self.version += 1
        self._add_funds(await waiting_orders.funds_of(session, unknown_accounts - set(self.funds)))

    def _add_funds(self, funds: dict[str, Decimal]) -> None:
        if funds:
            self.funds.update(funds)
            self.version += 1
