"""The money invariants a chaos run checks every few seconds and at the end, each by name.

What must hold at every instant (two live owners of one VM, a billed hour paid twice, a ledger
that does not sum to its balance, a balance below zero) breaks at once. What the service fixes
by itself in time (a VM whose create is still being resolved or whose delete is on its way, an
order mid-deploy) breaks only when it lasts longer than that time allows (`settle_seconds`)."""

import time
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlalchemy import func, select

from app.core.clock import utcnow
from app.core.states import AttemptStatus, DeliveryStatus, HoldStatus, LedgerKind, OrderStatus
from app.simulators.control import SimControl
from app.storage.db import create_engine
from app.storage.models import (
    Account,
    Attempt,
    Hold,
    LedgerEntry,
    Order,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)

# A VM in one of these states is gone or going: our delete was taken, or the provider ended it
# (a QuantaCloud deployment that `failed` stops billing and cannot be stopped).
GONE = {"deleting", "discontinued", "DELETING", "DELETED", "SUSPENDED", "stopping", "terminated",
        "interrupted", "failed"}  # fmt: skip
LIVE_ATTEMPTS = {AttemptStatus.CREATING, AttemptStatus.UNKNOWN, AttemptStatus.DEPLOYED,
                 AttemptStatus.RUNNING, AttemptStatus.TERMINATING}  # fmt: skip
OWNING_ORDERS = {OrderStatus.DEPLOYING, OrderStatus.DEPLOYED, OrderStatus.RUNNING,
                 OrderStatus.TERMINATING}  # fmt: skip
STUCK_AFTER = {OrderStatus.DEPLOYING: 120.0, OrderStatus.TERMINATING: 180.0}
OVERDUE_DELETE = 30.0  # a delete retry this late: the terminator is not doing its work


@dataclass(frozen=True)
class Broken:
    """One broken invariant: its name and what was seen."""

    rule: str
    detail: str


class Checker:
    """Reads the service's database and the simulators, and says which rules broke."""

    def __init__(self, database_url: str, sim: SimControl, *, settle_seconds: float) -> None:
        # Each check reads one snapshot (a ledger and its holds are written together; read apart,
        # on PostgreSQL, a hold committed between two reads would look like a broken sum), and
        # on SQLite it never takes the write lock the service's writers queue on.
        snapshot = (
            {"sqlite_begin": "DEFERRED"}
            if database_url.startswith("sqlite")
            else {"isolation_level": "REPEATABLE READ"}
        )
        self._base = create_engine(database_url)
        self.engine = self._base.execution_options(**snapshot)
        self.sim = sim
        self.settle_seconds = settle_seconds
        self.runs: Counter[str] = Counter()  # how often each rule was checked
        self._first_seen: dict[str, float] = {}

    async def aclose(self) -> None:
        await self._base.dispose()

    def _lasting(self, seen: dict[str, str], limit: float) -> list[str]:
        """Of the suspicions seen now (key -> what), those seen for longer than `limit`."""
        now = time.monotonic()
        for key in [k for k in self._first_seen if k.split("|")[0] == "vm" and k not in seen]:
            del self._first_seen[key]
        lasting = []
        for key, what in seen.items():
            first = self._first_seen.setdefault(key, now)
            if now - first > limit:
                lasting.append(f"{what} (for {now - first:.0f} s)")
        return lasting

    async def all_now(self) -> list[Broken]:
        """The rules checked every few seconds while the chaos runs."""
        return [*await self.vm_owners(), *await self.money(), *await self.stuck_orders()]

    # --- every VM at a simulator has exactly one owner -----------------------------------------

    async def _sim_vms(self) -> list[tuple[str, str, str, str]]:
        """(provider, id, name, status) of every VM (and Verda cluster) the simulators hold."""
        found = []
        for provider in SimControl.providers():
            for vm in await self.sim.vms(provider):
                found.append((provider, str(vm["id"]), str(vm.get("name") or ""), vm["status"]))
        for cluster in await self.sim.clusters("verda"):
            found.append(("verda", str(cluster["id"]), cluster["name"], cluster["status"]))
        return found

    async def billed_volumes(self) -> list[str]:
        """Every volume a simulator still bills (not deleted for good), as `provider id (name,
        status)`: at the end, none of ours may be left."""
        left = []
        for provider in SimControl.providers():
            for volume in await self.sim.volumes(provider):
                if volume["status"] != "deleted":
                    left.append(f"{provider} {volume['id']} ({volume['name']}, {volume['status']})")
        return left

    async def volumes(self) -> list[Broken]:
        """At the end, nothing of ours is billed apart from machines: every volume deleted."""
        self.runs["volumes"] += 1
        return [Broken("volume_left_billing", f"{v} still bills at the end") for v in
                await self.billed_volumes()]  # fmt: skip

    async def vm_owners(self, *, final: bool = False) -> list[Broken]:
        """Every live VM is owned by exactly one live attempt of an order that says it is
        deploying, deployed, running or terminating; at the end, no VM is left at all."""
        self.runs["vm_owners"] += 1
        async with self.engine.connect() as connection:
            rows = (
                await connection.execute(
                    select(
                        Attempt.id,
                        Attempt.provider,
                        Attempt.provider_vm_id,
                        Attempt.vm_name,
                        Attempt.status,
                        Attempt.machines,
                        Order.id.label("order_id"),
                        Order.status.label("order_status"),
                    ).join(Order, Order.id == Attempt.order_id)
                )
            ).all()
        by_id: dict[tuple[str, str], list[Any]] = {}
        by_name: dict[str, list[Any]] = {}
        for row in rows:
            ids = {row.provider_vm_id, *(m.get("id") for m in row.machines or [])}
            for vm_id in ids - {None}:
                by_id.setdefault((row.provider, str(vm_id)), []).append(row)
            by_name.setdefault(row.vm_name, []).append(row)
        broken, suspects = [], {}
        for provider, vm_id, name, status in await self._sim_vms():
            if status in GONE:
                continue
            node_of = name.rsplit("-", 1)[0] if name.rsplit("-", 1)[-1].isdigit() else None
            owners = {r.id: r for r in by_id.get((provider, vm_id), [])}
            for candidate in (name, node_of):
                for row in by_name.get(candidate or "", []):
                    if row.provider == provider:
                        owners[row.id] = row
            live = [r for r in owners.values() if AttemptStatus(r.status) in LIVE_ATTEMPTS]
            what = f"{provider} VM {vm_id} ({name or 'no name'}, {status})"
            if final:
                broken.append(Broken("vm_left_behind", f"{what} is still there at the end"))
            elif len({r.order_id for r in live}) > 1:
                orders = ", ".join(sorted({r.order_id for r in live}))
                broken.append(Broken("vm_two_owners", f"{what} is owned by {orders}"))
            elif not live:
                suspects[f"vm|{provider}|{vm_id}"] = f"{what} has no live owner"
            elif OrderStatus(live[0].order_status) not in OWNING_ORDERS:
                order = f"{live[0].order_id} ({live[0].order_status})"
                suspects[f"vm|{provider}|{vm_id}"] = f"{what} is owned by {order}"
        broken += [Broken("vm_owner", s) for s in self._lasting(suspects, self.settle_seconds)]
        return broken

    # --- money -----------------------------------------------------------------------------

    async def money(self) -> list[Broken]:
        """Each account's ledger sums to its balance and its open holds to what it holds; no
        balance below zero; no billed hour paid twice or skipped."""
        self.runs["money"] += 1
        broken = []
        async with self.engine.connect() as connection:
            sums = (
                await connection.execute(
                    select(
                        LedgerEntry.account_id, LedgerEntry.kind, func.sum(LedgerEntry.amount)
                    ).group_by(LedgerEntry.account_id, LedgerEntry.kind)
                )
            ).all()
            held = dict(
                (
                    await connection.execute(
                        select(Hold.account_id, func.sum(Hold.amount))
                        .where(Hold.status == HoldStatus.OPEN)
                        .group_by(Hold.account_id)
                    )
                ).all()
            )
            accounts = (
                await connection.execute(select(Account.id, Account.balance, Account.held))
            ).all()
            hours = (
                await connection.execute(
                    select(
                        LedgerEntry.attempt_id,
                        func.count(),
                        func.count(func.distinct(LedgerEntry.billing_hour)),
                        func.max(LedgerEntry.billing_hour),
                    )
                    .where(
                        LedgerEntry.kind == LedgerKind.DEBIT, LedgerEntry.billing_hour.is_not(None)
                    )
                    .group_by(LedgerEntry.attempt_id)
                )
            ).all()
        moved: dict[str, Decimal] = {}
        sign = {LedgerKind.TOPUP: 1, LedgerKind.REFUND: 1, LedgerKind.DEBIT: -1}
        for account_id, kind, total in sums:
            if LedgerKind(kind) in sign:
                moved[account_id] = moved.get(account_id, Decimal(0)) + sign[
                    LedgerKind(kind)
                ] * Decimal(total)
        for account_id, balance, holding in accounts:
            if moved.get(account_id, Decimal(0)) != balance:
                broken.append(
                    Broken(
                        "ledger_sums",
                        f"{account_id}: ledger sums to {moved.get(account_id)}, balance {balance}",
                    )
                )
            if Decimal(held.get(account_id) or 0) != holding:
                broken.append(
                    Broken(
                        "holds_sum",
                        f"{account_id}: open holds {held.get(account_id)}, held {holding}",
                    )
                )
            if balance < 0 or holding < 0 or balance - holding < 0:
                broken.append(
                    Broken("balance_below_zero", f"{account_id}: balance {balance}, held {holding}")
                )
        for attempt_id, debits, distinct, last in hours:
            if debits != distinct:
                broken.append(
                    Broken("hour_paid_twice", f"{attempt_id}: {debits} debits for {distinct} hours")
                )
            if last != distinct:
                broken.append(
                    Broken("hour_skipped", f"{attempt_id}: hours 1..{last} but {distinct} paid")
                )
        return broken

    # --- no order stuck --------------------------------------------------------------------

    async def stuck_orders(self) -> list[Broken]:
        """No order deploying or terminating for longer than its outcome or delete retries
        allow. A delete the provider keeps refusing is retried with a growing wait (up to a
        minute), for as long as it refuses: such an order is stuck only once its next delete
        is overdue by OVERDUE_DELETE seconds (the first is due when the order is terminated),
        not for being refused or held back many times."""
        self.runs["stuck_orders"] += 1
        statuses = list(STUCK_AFTER)
        async with self.engine.connect() as connection:
            rows = (
                await connection.execute(
                    select(Order.id, Order.status).where(Order.status.in_(statuses))
                )
            ).all()
            retries = dict(
                (
                    await connection.execute(
                        select(Attempt.order_id, func.max(Attempt.next_delete_at))
                        .where(Attempt.status == AttemptStatus.TERMINATING)
                        .group_by(Attempt.order_id)
                    )
                ).all()
            )
        now, wall = time.monotonic(), utcnow()
        seen = {f"order|{order_id}|{status}" for order_id, status in rows}
        for key in [k for k in self._first_seen if k.startswith("order|") and k not in seen]:
            del self._first_seen[key]
        broken = []
        for order_id, status in rows:
            first = self._first_seen.setdefault(f"order|{order_id}|{status}", now)
            if now - first <= STUCK_AFTER[OrderStatus(status)]:
                continue
            next_delete = retries.get(order_id)
            if next_delete is not None and (wall - next_delete).total_seconds() < OVERDUE_DELETE:
                continue  # refused again and again, and retried on time
            late = "" if next_delete is None else f", its next delete due at {next_delete:%X}"
            broken.append(
                Broken("order_stuck", f"{order_id} {status} for {now - first:.0f} s{late}")
            )
        return broken

    # --- events ----------------------------------------------------------------------------

    async def webhooks(self, receivers: dict[str, set[str]]) -> list[Broken]:
        """Every event of an endpoint's account since it was made has a delivery to it, each
        delivery succeeded, and its receiver accepted (signature checked) every such event.
        `receivers`: endpoint id -> the webhook ids its receiver accepted."""
        self.runs["webhooks"] += 1
        broken = []
        async with self.engine.connect() as connection:
            for endpoint_id, accepted in receivers.items():
                events, deliveries = await self._endpoint(connection, endpoint_id)
                delivered = {e for e, s in deliveries if s == DeliveryStatus.SUCCEEDED}
                made = {e for e, _ in deliveries}
                if events - made:
                    what = f"{endpoint_id}: {len(events - made)} events with no delivery"
                    broken.append(Broken("webhook_fan_out", what))
                if delivered != made:
                    what = f"{endpoint_id}: {len(made - delivered)} deliveries not succeeded"
                    broken.append(Broken("webhook_delivered", what))
                if not delivered <= accepted:
                    what = f"{endpoint_id}: {len(delivered - accepted)} succeeded, not accepted"
                    broken.append(Broken("webhook_received", what))
        return broken

    @staticmethod
    async def _endpoint(connection: Any, endpoint_id: str) -> tuple[set[str], list[Any]]:
        """The webhook events an endpoint should get, and its deliveries (event id, status)."""
        endpoint = (
            await connection.execute(
                select(WebhookEndpoint.account_id, WebhookEndpoint.created_at).where(
                    WebhookEndpoint.id == endpoint_id
                )
            )
        ).one()
        events = await connection.execute(
            select(WebhookEvent.id).where(
                WebhookEvent.account_id == endpoint.account_id,
                WebhookEvent.created_at >= endpoint.created_at,
            )
        )
        deliveries = await connection.execute(
            select(WebhookDelivery.event_id, WebhookDelivery.status).where(
                WebhookDelivery.endpoint_id == endpoint_id
            )
        )
        return set(events.scalars()), list(deliveries.all())

    @staticmethod
    def stream(name: str, got: list[int], truth: list[int]) -> list[Broken]:
        """A stream client, after all its resumes, has every event of its account exactly
        once, in order."""
        if got == truth:
            return []
        twice = [i for i, n in Counter(got).items() if n > 1]
        missing = sorted(set(truth) - set(got))
        order = got == sorted(got)
        return [
            Broken(
                "stream_exactly_once",
                f"{name}: {len(got)} events for {len(truth)}; twice {twice[:5]}, missing "
                f"{missing[:5]}, in order: {order}",
            )
        ]
