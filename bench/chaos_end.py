"""The end of a chaos run: what the harness reads and does once the chaos stops (money and
stock for every order still open, the waiting rule, every order ended as its user would) and
the counts of the report.

Once stock and money are back, the orders still waiting deploy at the pace their providers
allow: a provider that says only whether a kind is available gets one create per read of it,
and every provider has its rate limit, so after an hour hundreds may wait for one kind. Each
kind of order still waiting must see one of its orders leave `waiting` within WAIT_SECONDS,
and all must be gone within WAIT_MAX_SECONDS. Then every machine must end within three minutes
of its terminate, and QuantaCloud's rate-limit window (15 minutes) on top: after an hour of
reads that window is full, and hundreds of deletes at once get room only as it rolls (they
are held for room, not refused)."""

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

from chaos_world import SERVICE_SETTINGS, Api
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.storage.models import Account, Attempt, LedgerEntry, Order, OrderEvent, PublishedEvent

WAIT_SECONDS = 120
WAIT_MAX_SECONDS = 20 * 60
END_SECONDS = 180 + 15 * 60
LIVE = ["deploying", "deployed", "running", "terminating"]
# Each kind's stock for the end. A simulator never puts back what a create took (a deleted VM,
# a cluster's node made before its other failed, a create that failed after it was accepted),
# so the end's stock must outlast every create the backlog makes: 500 ran out at Hyperstack
# after an hour (892 nodes asked for there once it came back, pairs counting two).
END_STOCK = 100_000
BILLING_HOUR_SECONDS = float(SERVICE_SETTINGS["AUTOPROVISION_BILLING_HOUR_SECONDS"])


async def until(holds: Callable[[], Awaitable[bool]], seconds: float) -> bool:
    """Wait for `holds` (asked every half second) for at most `seconds`; whether it did."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await holds():
            return True
        await asyncio.sleep(0.5)
    return False


class Ending:
    """The orders of a run as the end sees them, through the database and the API."""

    def __init__(
        self,
        engine: AsyncEngine,
        api: Api,
        accounts: list[dict[str, Any]],
        orders: list[tuple[str, str]],
    ) -> None:
        self.engine = engine
        self.api = api
        self.accounts = accounts
        self.orders = orders  # (API key, order id), as placed

    async def final_top_ups(self) -> dict[str, Decimal]:
        """What each account is given so that all its orders can deploy and run through the
        drain: every open order's highest price (its dearest alternative's) for each billing
        hour the drain can last (its hours are 10 s) and one more (the hold), and $100 over.
        (A flat $1,000 was short for accounts with dozens of orders waiting, and so were two
        hours: their machines billed on through the drain, and the orders still waiting stayed
        short of money.)"""
        need: dict[str, Decimal] = {}
        async with self.engine.connect() as connection:
            rows = await connection.execute(
                select(Order.account_id, Order.max_price_per_hour, Order.alternatives).where(
                    Order.status.in_(["waiting", *LIVE])
                )
            )
            for account_id, first_price, alternatives in rows:
                prices = [Decimal(a["max_price_per_hour"]) for a in alternatives or []]
                need[account_id] = need.get(account_id, Decimal(0)) + max([first_price, *prices])
        hours = math.ceil((WAIT_MAX_SECONDS + END_SECONDS) / BILLING_HOUR_SECONDS) + 1
        return {a["id"]: need.get(a["id"], Decimal(0)) * hours + 100 for a in self.accounts}

    async def stalled_waiting(self) -> set[str]:
        """Wait until no order waits; the orders still waiting of every kind (what it wants)
        that saw none of its orders leave `waiting` for WAIT_SECONDS, or of all kinds once
        WAIT_MAX_SECONDS have passed. Empty once none waits."""
        give_up = time.monotonic() + WAIT_MAX_SECONDS
        before: dict[tuple[str, ...], set[str]] = {}
        moved: dict[tuple[str, ...], float] = {}
        while True:
            now, waiting = time.monotonic(), await self._waiting_by_kind()
            for kind, orders in waiting.items():
                if kind not in before or before[kind] - orders:
                    moved[kind] = now
            stalled = [o for k, o in waiting.items() if now - moved[k] > WAIT_SECONDS]
            if not waiting or stalled or now > give_up:
                return set().union(*(stalled or waiting.values()))
            before = waiting
            await asyncio.sleep(0.5)

    async def _waiting_by_kind(self) -> dict[tuple[str, ...], set[str]]:
        async with self.engine.connect() as connection:
            rows = await connection.execute(
                select(
                    Order.id, Order.gpu_model, Order.nodes, Order.providers, Order.alternatives
                ).where(Order.status == "waiting")
            )
            kinds: dict[tuple[str, ...], set[str]] = {}
            for order_id, *wants in rows:
                kinds.setdefault(tuple(json.dumps(w, sort_keys=True) for w in wants), set()).add(
                    order_id
                )
            return kinds

    async def end_every_order(self) -> bool:
        """Cancel every order still waiting and terminate every one with a machine, as their
        users would; True once none is left open."""
        keys = {order_id: key for key, order_id in self.orders}
        async with self.engine.connect() as connection:
            rows = (
                await connection.execute(
                    select(Order.id, Order.status).where(Order.status.in_(["waiting", *LIVE]))
                )
            ).all()
        for order_id, status in rows:
            if order_id not in keys or status == "terminating":
                continue
            verb = "cancel" if status == "waiting" else "terminate"
            await self.api.call("POST", f"/v1/orders/{order_id}/{verb}", key=keys[order_id])
        return not rows

    async def orders_in(self, statuses: list[str], only: set[str] | None = None) -> list[str]:
        """Five of the orders in these statuses (of `only`, if given), each with the last line
        of its timeline: what a broken rule's report shows."""
        query = select(Order.id, Order.status).where(Order.status.in_(statuses))
        if only is not None:
            query = query.where(Order.id.in_(sorted(only)))
        async with self.engine.connect() as connection:
            rows = (await connection.execute(query.order_by(Order.id).limit(5))).all()
            described = []
            for order_id, status in rows:
                last = await connection.scalar(
                    select(OrderEvent.message)
                    .where(OrderEvent.order_id == order_id)
                    .order_by(OrderEvent.id.desc())
                    .limit(1)
                )
                described.append(f"{order_id} {status}: {last}")
            return described

    async def funds(self) -> dict[str, str]:
        """Each account's available balance (balance less holds) in the database."""
        async with self.engine.connect() as connection:
            rows = await connection.execute(select(Account.id, Account.balance, Account.held))
            return {account_id: str(balance - held) for account_id, balance, held in rows}

    async def event_ids(self, key: str) -> list[int]:
        """Every event id the API lists for the account of `key`, page by page."""
        ids, after = [], 0
        while True:
            page = await self.api.call("GET", f"/v1/events?after={after}&limit=100", key=key)
            assert page is not None and page.status_code == 200
            body = page.json()
            ids += [e["id"] for e in body["data"]]
            if not body["data"]:
                return ids
            after = body["next_cursor"]


async def database_counts(engine: AsyncEngine) -> dict[str, int]:
    """What the run left in the database: orders, deploys, terminations (and why), billed
    hours, events published."""
    counts: dict[str, int] = {}
    async with engine.connect() as connection:
        scalar = connection.scalar
        counts["orders"] = await scalar(select(func.count()).select_from(Order)) or 0
        counts["deploys"] = (
            await scalar(select(func.count()).where(Attempt.running_at.is_not(None))) or 0
        )
        counts["terminated"] = (
            await scalar(select(func.count()).where(Order.status == "terminated")) or 0
        )
        counts["billed_hours"] = (
            await scalar(select(func.count()).where(LedgerEntry.billing_hour.is_not(None))) or 0
        )
        reasons = await connection.execute(
            select(Order.terminate_reason, func.count())
            .where(Order.terminate_reason.is_not(None))
            .group_by(Order.terminate_reason)
        )
        for reason, count in reasons:
            counts[f"terminated {reason}"] = count
        counts["events"] = await scalar(select(func.count()).select_from(PublishedEvent)) or 0
    return counts
