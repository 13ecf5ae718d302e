"""The database side of the deploy protocol (ARCHITECTURE.md) after the claim: settle.

1. The claim (`claims`) commits the intent: order deploying, one hour held, attempt written.
2. The create call happens outside any transaction.
3. One `settle_*` records the outcome. Each settles an attempt at most once: it only moves an
   attempt that is still `creating` or `unknown`, so a late answer and the reconciler cannot
   both settle the same attempt.
"""

from datetime import datetime
from decimal import Decimal

from sqlalchemy import or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core import metering
from app.core.clock import utcnow
from app.core.market import VM, OfferKey
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
from app.providers.registry import display_name, spec_for, vm_named
from app.services import ledger, timeline
from app.services.limits import format_time, limits_line
from app.services.timeline import Line
from app.services.webhooks import outbox
from app.storage.models import Attempt, Order


class VMAlreadyOwned(Exception):
    """The VM is already recorded as another live attempt's: it is not this attempt's."""


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
            f"{name} made {len(vm.machines)} of the cluster's {attempt.nodes} nodes "
            f"({vm_named(vm.id)}): "
            f"the hour held ({price}) is released; deleting what was made.",
        )
    return Line(
        attempt.order_id,
        OrderEventKind.DEPLOYED,
        f"{name} accepted the create: {vm_named(vm.id)} is starting; first hour charged ({price}).",
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
            note=f"{vm_named(attempt.provider_vm_id)} failed before it ran",
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
    return await _note_once(
        session,
        attempt_id=attempt_id,
        status=AttemptStatus.UNKNOWN,
        kind=OrderEventKind.OUTCOME_AMBIGUOUS,
        message=message,
    )


async def note_not_running(
    session: AsyncSession, *, attempt_id: str, kind: OrderEventKind, message: str
) -> bool:
    """A deployed VM is not running yet for a reason worth saying (a status we do not know, a
    late delete refused): say it on the timeline, once per reason; whether it was said now."""
    return await _note_once(
        session, attempt_id=attempt_id, status=AttemptStatus.DEPLOYED, kind=kind, message=message
    )


async def _note_once(
    session: AsyncSession,
    *,
    attempt_id: str,
    status: AttemptStatus,
    kind: OrderEventKind,
    message: str,
) -> bool:
    detail = message[:500]
    noted = (
        await session.execute(
            update(Attempt)
            .where(
                Attempt.id == attempt_id,
                Attempt.status == status,
                or_(Attempt.detail.is_(None), Attempt.detail != detail),
            )
            # Not updated_at: the look-ups go on at the same pace, and a deployed attempt's
            # boot deadline runs from its last move.
            .values(detail=detail)
            .returning(Attempt.order_id)
            .execution_options(synchronize_session=False)
        )
    ).first()
    if noted is None:
        return False
    await timeline.write(session, Line(noted.order_id, kind, message))
    await session.flush()
    return True
