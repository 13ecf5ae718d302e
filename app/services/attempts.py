"""The database side of the deploy protocol (ARCHITECTURE.md): claim, then settle.

1. `claim`: the order goes waiting -> deploying (compare-and-set), one hour is held, and the
   attempt is written with its deterministic VM name and tag. The caller commits this before
   the create call, so a crash after it leaves an intent the reconciler can resolve.
2. The create call happens outside any transaction.
3. One `settle_*` records the outcome. Each settles an attempt at most once: it only moves an
   attempt that is still `creating` or `unknown`, so a late answer and the reconciler cannot
   both settle the same attempt.
"""

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, cast

from sqlalchemy import Connection, Table, bindparam, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core import metering
from app.core.clock import utcnow
from app.core.errors import InsufficientFunds
from app.core.ids import new_id
from app.core.market import MAX_ALTERNATIVES, VM, Offer, OfferKey
from app.core.money import format_usd
from app.core.states import (
    OPEN_ATTEMPTS,
    AttemptStatus,
    OrderEventKind,
    OrderStatus,
    WebhookEventType,
    check_attempt_move,
    check_order_move,
)
from app.providers.registry import display_name, spec_for
from app.services import ledger, timeline
from app.services.limits import format_time, limits_line
from app.services.timeline import Line
from app.services.webhooks import outbox
from app.storage.models import Attempt, Order
from app.storage.types import UTCDateTime

COLUMNS = Attempt.__table__.columns
DEFAULT_HOUR_SECONDS = 3600.0
# Built once: on the deploy path, building and keying a statement costs more than running it.
_orders = cast(Table, Order.__table__)


def _claim_statement(alternative: int) -> Any:
    """The claim of a waiting order for an offer matched to its alternative `alternative`."""
    # A cluster offer is never claimed for an alternative of one machine, nor the reverse: the
    # offer's nodes must be those of the alternative it was matched to (the first is the
    # order's own columns; the others are listed in `alternatives`).
    nodes = (
        _orders.c.nodes
        if alternative == 1
        else _orders.c.alternatives[(alternative - 1, "nodes")].as_integer()
    )
    return (
        update(_orders)
        .where(
            _orders.c.id == bindparam("order_id"),
            _orders.c.status == OrderStatus.WAITING,
            nodes == bindparam("offer_nodes"),
        )
        .values(
            status=OrderStatus.DEPLOYING,
            updated_at=bindparam("now", type_=UTCDateTime()),
            attempts=_orders.c.attempts + 1,
        )
        .returning(
            _orders.c.account_id,
            _orders.c.ssh_public_key,
            _orders.c.min_disk_gb,
            _orders.c.attempts,
            # Read by the claim itself: no statement more on the way from stock to create.
            _orders.c.startup_script,
            _orders.c.image,
        )
    )


_CLAIMS = {n: _claim_statement(n) for n in range(1, MAX_ALTERNATIVES + 1)}
check_order_move(OrderStatus.WAITING, OrderStatus.DEPLOYING)  # what _CLAIMS do, checked once
_INSERT_ATTEMPT = insert(cast(Table, Attempt.__table__))


class KindBusy(Exception):
    """Another attempt of this kind is still open at a provider that cannot name VMs."""


class VMAlreadyOwned(Exception):
    """The VM is already recorded as another live attempt's: it is not this attempt's."""


@dataclass(frozen=True)
class Intent:
    """A committed create attempt: everything the create call needs."""

    attempt_id: str
    order_id: str
    number: int
    vm_name: str
    tag: str
    offer: Offer
    price_with_fees: Decimal
    ssh_public_key: str | None
    disk_gb: int | None
    created_at: datetime
    # The order's start-up script as stored (sealed for the order's id): the deployer opens it.
    sealed_startup_script: str | None = None
    image: str | None = None  # the image the order names (None: the provider's configured one)


VM_NAME_PREFIX = "ap-"


def vm_name(order_id: str, number: int) -> str:
    """The VM name an attempt is created with: `ap-<order token>-<attempt>` (<= 50 chars)."""
    return f"{VM_NAME_PREFIX}{order_id.partition('_')[2]}-{number}"


VM_TAG_PREFIX = "ap-order-"


def vm_tag(order_id: str) -> str:
    """The tag every VM of one order carries: `ap-order-<order token>`."""
    return f"{VM_TAG_PREFIX}{order_id.partition('_')[2]}"


def describe_offer(offer: Offer, price_with_fees: Decimal) -> str:
    """`Verda FIN-01 8B300.240V at $46.10/h incl. fees`."""
    return (
        f"{display_name(offer.provider)} {offer.region} {offer.sku} at "
        f"{format_usd(price_with_fees)}/h incl. fees"
    )


def serial_kind(region: str, sku: str) -> str:
    """The kind of machine an attempt at a provider that cannot name VMs is serialized on."""
    return f"{region}/{sku}"


async def claim(
    session: AsyncSession, *, order_id: str, offer: Offer, price_with_fees: Decimal
) -> Intent | None:
    """Claim a waiting order for `offer`; None if it is no longer waiting.

    Raises InsufficientFunds (nothing written) when one hour is more than the account's
    available balance, and KindBusy when the provider cannot name VMs and another attempt of
    this kind is still open (the caller rolls back what was written).
    """
    connection = await session.connection()
    return await connection.run_sync(
        claim_on, order_id=order_id, offer=offer, price_with_fees=price_with_fees
    )


def claim_all(
    connection: Connection,
    claims: Sequence[tuple[str, Offer, Decimal, int]],
    *,
    billing_hour_seconds: float = DEFAULT_HOUR_SECONDS,
) -> tuple[list[Intent], set[str]]:
    """Claim each (order, offer, price with fees, alternative) in the connection's transaction.

    Returns the intents, and the ids of orders that were not waiting any more. Of several,
    one short of money or of a free kind is skipped and spoils no other (a savepoint each);
    a single one raises, and the caller rolls back.
    """
    intents: list[Intent] = []
    gone: set[str] = set()
    for order_id, offer, price_with_fees, alternative in claims:
        isolated = connection.begin_nested() if len(claims) > 1 else contextlib.nullcontext()
        try:
            with isolated:
                intent = claim_on(
                    connection,
                    order_id=order_id,
                    offer=offer,
                    price_with_fees=price_with_fees,
                    billing_hour_seconds=billing_hour_seconds,
                    alternative=alternative,
                )
        except (InsufficientFunds, KindBusy):
            if len(claims) == 1:
                raise
            continue  # the balance moved, or a create of that kind is open
        if intent is None:
            gone.add(order_id)
        else:
            intents.append(intent)
    return intents, gone


def claim_on(
    connection: Connection,
    *,
    order_id: str,
    offer: Offer,
    price_with_fees: Decimal,
    billing_hour_seconds: float = DEFAULT_HOUR_SECONDS,
    alternative: int = 1,
) -> Intent | None:
    """`claim` in a transaction of a synchronous connection (one hop on the deploy path); the
    machine's billing hours will last `billing_hour_seconds`; `alternative`: which of the
    order's alternatives the offer was matched to."""
    now = utcnow()
    claimed = connection.execute(
        _CLAIMS[alternative], {"order_id": order_id, "now": now, "offer_nodes": offer.nodes}
    ).first()
    if claimed is None:
        return None
    account_id, ssh_public_key, min_disk_gb, number, sealed_script, image = claimed
    hold = ledger.place_hold_on(
        connection, account_id=account_id, amount=price_with_fees, order_id=order_id
    )
    attempt = Attempt(
        id=new_id("dep"),
        provider_vm_id=None,
        provider_status=None,
        ip=None,
        detail=None,
        running_at=None,
        order_id=order_id,
        number=number,
        provider=str(offer.provider),
        region=offer.region,
        sku=offer.sku,
        gpu_model=offer.gpu_model,
        gpu_count=offer.gpu_count,
        nodes=offer.nodes,
        alternative=alternative,
        machines=None,
        offer_id=offer.offer_id,
        vm_name=vm_name(order_id, number),
        tag=vm_tag(order_id),
        serial_kind=None
        if spec_for(offer.provider).finds_vms_by_name
        else serial_kind(offer.region, offer.sku),
        price_per_hour=offer.price_per_hour,
        price_per_hour_with_fees=price_with_fees,
        status=AttemptStatus.CREATING,
        hold_id=hold.id,
        created_at=now,
        updated_at=now,
        billing_hour_seconds=billing_hour_seconds,
        billed_from=None,
        paid_hours=0,
        charged=Decimal(0),
        unpaid_since=None,
        ended_at=None,
        delete_attempts=0,
        next_delete_at=None,
    )
    # Plain INSERTs: this commit is on the path from stock read to create call.
    try:
        connection.execute(_INSERT_ATTEMPT, {c.key: getattr(attempt, c.key) for c in COLUMNS})
    except IntegrityError as exc:
        if "serial_kind" in str(exc.orig):
            raise KindBusy(attempt.serial_kind) from exc
        raise
    timeline.write_on(
        connection,
        Line(
            order_id,
            OrderEventKind.CREATE_SENT,
            f"{describe_offer(offer, price_with_fees)}: create sent"
            f"{f' (alternative {alternative})' if alternative > 1 else ''}.",
        ),
    )
    return Intent(
        attempt_id=attempt.id,
        order_id=order_id,
        number=number,
        vm_name=attempt.vm_name,
        tag=attempt.tag,
        offer=offer,
        price_with_fees=price_with_fees,
        ssh_public_key=ssh_public_key,
        disk_gb=min_disk_gb,
        created_at=now,
        sealed_startup_script=sealed_script,
        image=image,
    )


async def move_attempt(
    session: AsyncSession,
    attempt_id: str,
    *,
    allowed: tuple[AttemptStatus, ...],
    status: AttemptStatus,
    **values: object,
) -> Attempt | None:
    """Compare-and-set a deployment's status; the row as it is after, or None if not allowed."""
    check_attempt_move(allowed, status)
    moved = (
        await session.execute(
            update(Attempt)
            .where(Attempt.id == attempt_id, Attempt.status.in_(allowed))
            .values(status=status, updated_at=utcnow(), **values)
            .returning(Attempt.id)
            .execution_options(synchronize_session=False)
        )
    ).first()
    if moved is None:
        return None
    return await session.get(Attempt, attempt_id, populate_existing=True)


async def move_order(
    session: AsyncSession, order_id: str, *, expected: OrderStatus, status: OrderStatus
) -> bool:
    """Compare-and-set an order's status; whether it moved."""
    check_order_move(expected, status)
    moved = (
        await session.execute(
            update(Order)
            .where(Order.id == order_id, Order.status == expected)
            .values(status=status, updated_at=utcnow())
            .returning(Order.id)
            .execution_options(synchronize_session=False)
        )
    ).first()
    return moved is not None


async def settle_created(
    session: AsyncSession, *, attempt_id: str, vm: VM, now: datetime | None = None
) -> bool:
    """The provider accepted the create: the order is deployed and its first hour is paid
    (where the provider bills from the accepted create, the hour begins now).

    Raises VMAlreadyOwned (nothing written) when another live attempt already owns the VM.
    An order whose terminate was asked for meanwhile stays terminating: the terminator deletes.
    """
    now = now or utcnow()
    # A cluster of single VMs with nodes missing is taken apart next (the follower): its hour
    # is released, not paid, and no `order.deployed` is said for it.
    whole = not _assembled(vm) or len(vm.machines) >= await _nodes_of(session, attempt_id)
    try:
        async with session.begin_nested():
            attempt = await move_attempt(
                session,
                attempt_id,
                allowed=OPEN_ATTEMPTS,
                status=AttemptStatus.DEPLOYED,
                provider_vm_id=vm.id,
                provider_status=vm.provider_status[:40],
                paid_hours=1 if whole else 0,
                charged=Attempt.price_per_hour_with_fees if whole else Decimal(0),
            )
    except IntegrityError as exc:
        if "provider_vm_id" not in str(exc.orig) and "live_provider_vm" not in str(exc.orig):
            raise
        raise VMAlreadyOwned(vm.id) from exc
    if attempt is None:
        return False
    if spec_for(attempt.provider).billing.from_accepted:
        attempt.billed_from = now
    deployed = await move_order(
        session, attempt.order_id, expected=OrderStatus.DEPLOYING, status=OrderStatus.DEPLOYED
    )
    if attempt.hold_id is not None and whole:
        await ledger.debit_hold(
            session, hold_id=attempt.hold_id, attempt_id=attempt.id, billing_hour=1
        )
    elif attempt.hold_id is not None:
        await ledger.release_hold(session, hold_id=attempt.hold_id)
    await timeline.write(session, _accepted_line(attempt, vm))
    if deployed and whole:
        await outbox.emit(
            session, order_id=attempt.order_id, event_type=WebhookEventType.ORDER_DEPLOYED
        )
    await session.flush()
    return True


def _assembled(vm: VM) -> bool:
    """Whether `vm` is a cluster made of single VMs (`providers/assembly.py`)."""
    shapes = spec_for(vm.provider).clusters
    return bool(vm.machines) and shapes is not None and shapes.assembled


async def _nodes_of(session: AsyncSession, attempt_id: str) -> int:
    nodes = await session.scalar(select(Attempt.nodes).where(Attempt.id == attempt_id))
    return 1 if nodes is None else nodes


def _accepted_line(attempt: Attempt, vm: VM) -> Line:
    name = display_name(attempt.provider)
    price = format_usd(attempt.price_per_hour_with_fees)
    if _assembled(vm) and len(vm.machines) < attempt.nodes:
        return Line(
            attempt.order_id,
            OrderEventKind.VM_FAILED,
            f"{name} made {len(vm.machines)} of the cluster's {attempt.nodes} nodes ({vm.id}): "
            f"the hour held ({price}) is released; deleting what was made.",
        )
    return Line(
        attempt.order_id,
        OrderEventKind.DEPLOYED,
        f"{name} accepted the create: VM {vm.id} is starting; first hour charged ({price}).",
    )


async def settle_not_created(
    session: AsyncSession,
    *,
    attempt_id: str,
    kind: OrderEventKind,
    message: str,
    fail_order: bool = False,
) -> bool:
    """No VM came of the attempt: release the hold; the order waits again (or fails)."""
    attempt = await move_attempt(
        session,
        attempt_id,
        allowed=OPEN_ATTEMPTS,
        status=AttemptStatus.NOT_CREATED,
        detail=message[:500],
    )
    if attempt is None:
        return False
    if attempt.hold_id is not None:
        await ledger.release_hold(session, hold_id=attempt.hold_id)
    moved = await move_order(
        session,
        attempt.order_id,
        expected=OrderStatus.DEPLOYING,
        status=OrderStatus.FAILED if fail_order else OrderStatus.WAITING,
    )
    await timeline.write(session, Line(attempt.order_id, kind, message))
    if moved and fail_order:
        await outbox.emit(
            session, order_id=attempt.order_id, event_type=WebhookEventType.ORDER_FAILED
        )
    await session.flush()
    return True


async def mark_unknown(session: AsyncSession, *, attempt_id: str, message: str) -> bool:
    """The create got no clear answer: keep the order deploying until the VM is looked up."""
    attempt = await move_attempt(
        session,
        attempt_id,
        allowed=(AttemptStatus.CREATING,),
        status=AttemptStatus.UNKNOWN,
        detail=message[:500],
    )
    if attempt is None:
        return False
    await timeline.write(
        session,
        Line(
            attempt.order_id,
            OrderEventKind.OUTCOME_UNKNOWN,
            f"{message}: checking whether the VM exists before anything else is sent.",
        ),
    )
    await session.flush()
    return True


def machines_of(vm: VM) -> list[dict[str, str | None]] | None:
    """A cluster's nodes as an attempt stores them (None for a single machine)."""
    if not vm.machines:
        return None
    return [
        {
            "id": m.id,
            "name": m.name,
            "ip": m.ip,
            "state": str(m.state),
            "provider_status": m.provider_status[:40],
        }
        for m in vm.machines
    ]


async def settle_running(
    session: AsyncSession, *, attempt_id: str, vm: VM, now: datetime | None = None
) -> bool:
    """The VM runs: record its IP; the order is running, and its first hour begins (unless its
    provider bills from the accepted create)."""
    now = now or utcnow()
    attempt = await move_attempt(
        session,
        attempt_id,
        allowed=(AttemptStatus.DEPLOYED,),
        status=AttemptStatus.RUNNING,
        ip=vm.ip,
        provider_status=vm.provider_status[:40],
        machines=machines_of(vm),
        running_at=now,
    )
    if attempt is None:
        return False
    if attempt.billed_from is None:
        attempt.billed_from = now
    running = await move_order(
        session, attempt.order_id, expected=OrderStatus.DEPLOYED, status=OrderStatus.RUNNING
    )
    order = await session.get(Order, attempt.order_id)
    assert order is not None  # foreign key
    paid = metering.paid_until(
        attempt.billed_from, attempt.paid_hours, attempt.billing_hour_seconds
    )
    lines = [
        Line(
            order.id,
            OrderEventKind.RUNNING,
            f"Running at {vm.ip}{_reached_through(attempt, vm)}; paid until {format_time(paid)}.",
        )
    ]
    limits = limits_line(order, attempt)
    if limits is not None:
        lines.append(limits)
    await timeline.write(session, *lines)
    if running:
        await outbox.emit(
            session, order_id=attempt.order_id, event_type=WebhookEventType.ORDER_RUNNING
        )
    await session.flush()
    return True


def _reached_through(attempt: Attempt, vm: VM) -> str:
    if not vm.machines:
        return ""
    if _assembled(vm):
        return f" (its first node; all {len(vm.machines)} run, each with its own address)"
    return " (its login node)"


async def settle_failed_before_running(
    session: AsyncSession, *, attempt_id: str, reason: str
) -> bool:
    """The provider failed the VM before it ran (we deleted it): refund; the order waits again."""
    attempt = await move_attempt(
        session,
        attempt_id,
        allowed=(AttemptStatus.DEPLOYED,),
        status=AttemptStatus.FAILED,
        detail=reason[:500],
    )
    if attempt is None:
        return False
    order = await session.get(Order, attempt.order_id)
    assert order is not None  # foreign key
    refunded = attempt.charged
    if refunded:  # nothing was paid for a cluster some of whose nodes were never made
        await ledger.refund(
            session,
            account_id=order.account_id,
            amount=refunded,
            order_id=order.id,
            attempt_id=attempt.id,
            note=f"VM {attempt.provider_vm_id} failed before it ran",
        )
    attempt.charged = Decimal(0)
    await move_order(session, order.id, expected=OrderStatus.DEPLOYED, status=OrderStatus.WAITING)
    await timeline.write(
        session,
        Line(
            order.id,
            OrderEventKind.VM_FAILED,
            f"{reason}: deleted {'what was made' if attempt.nodes > 1 else 'it'}"
            f"{f' and refunded {format_usd(refunded)}' if refunded else ''}; keeps waiting.",
        ),
    )
    await session.flush()
    return True


async def attempts_in(
    session: AsyncSession, *, statuses: tuple[AttemptStatus, ...]
) -> list[Attempt]:
    """Attempts in these states, oldest first."""
    statement = (
        select(Attempt).where(Attempt.status.in_(statuses)).order_by(Attempt.created_at, Attempt.id)
    )
    return list((await session.execute(statement)).scalars())


async def ownership_at(session: AsyncSession, *, provider: str) -> list[Attempt]:
    """The attempts at `provider` that are open or have recorded a VM, in one statement (so
    one snapshot: an attempt cannot settle between reading the open ones and the owned VMs)."""
    statement = select(Attempt).where(
        Attempt.provider == provider,
        or_(Attempt.status.in_(OPEN_ATTEMPTS), Attempt.provider_vm_id.is_not(None)),
    )
    return list((await session.execute(statement)).scalars())


async def recorded_at(session: AsyncSession, *, provider: str) -> list[Attempt]:
    """Every attempt ever made at `provider`."""
    rows = await session.execute(select(Attempt).where(Attempt.provider == provider))
    return list(rows.scalars())


async def open_serial_kinds(session: AsyncSession) -> set[OfferKey]:
    """(provider, region, sku) of every open attempt at providers that cannot name VMs."""
    rows = await session.execute(
        select(Attempt.provider, Attempt.region, Attempt.sku).where(
            Attempt.serial_kind.is_not(None), Attempt.status.in_(OPEN_ATTEMPTS)
        )
    )
    return {OfferKey(provider, region, sku) for provider, region, sku in rows}


async def note_unresolved(session: AsyncSession, *, attempt_id: str, message: str) -> bool:
    """An unclear create cannot be resolved yet: say why on the timeline, once per reason."""
    detail = message[:500]
    noted = (
        await session.execute(
            update(Attempt)
            .where(
                Attempt.id == attempt_id,
                Attempt.status == AttemptStatus.UNKNOWN,
                or_(Attempt.detail.is_(None), Attempt.detail != detail),
            )
            .values(detail=detail)  # not updated_at: the look-ups go on at the same pace
            .returning(Attempt.order_id)
            .execution_options(synchronize_session=False)
        )
    ).first()
    if noted is None:
        return False
    await timeline.write(session, Line(noted.order_id, OrderEventKind.OUTCOME_AMBIGUOUS, message))
    await session.flush()
    return True
