"""A running cluster's nodes as its provider reports them, and what a node it loses does: an
`order.node_lost` event, and the rest terminated where the order asked for that."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Conflict
from app.core.market import ENDED_VM_STATES, VM
from app.core.states import (
    AttemptStatus,
    NodeLostPolicy,
    OrderEventKind,
    TerminateReason,
    WebhookEventType,
)
from app.providers.registry import display_name
from app.services import terminations, timeline
from app.services.attempts import machines_of
from app.services.timeline import Line
from app.services.webhooks import outbox
from app.storage.models import Attempt, Order

# A node's state is stored as its `VMState`'s value; these are the ended ones.
ENDED_STATES = frozenset(str(state) for state in ENDED_VM_STATES)

Machines = list[dict[str, Any]]


@dataclass(frozen=True)
class NodesLost:
    """Nodes of a running cluster its provider lost just now, and whether the rest ends too."""

    order_id: str
    lost: tuple[str, ...]
    terminating: bool


def merged(before: Machines | None, reported: Machines) -> Machines:
    """The nodes as reported, plus those known before that the report no longer lists (gone)."""
    listed = {m["id"] for m in reported}
    vanished = [
        {**m, "state": "gone", "provider_status": "not listed"}
        for m in before or []
        if m["id"] not in listed
    ]
    return [*reported, *vanished]


def newly_lost(before: Machines | None, after: Machines) -> list[dict[str, Any]]:
    """The nodes that were not ended before and are now."""
    were_up = {m["id"] for m in before or [] if m.get("state") not in ENDED_STATES}
    return [m for m in after if m["id"] in were_up and m.get("state") in ENDED_STATES]


async def note_machines(
    session: AsyncSession, *, attempt_id: str, vm: VM, now: datetime
) -> NodesLost | None:
    """Record a running cluster's nodes as `vm` reports them; when some were lost since the
    last report, say so (timeline and event) and, if the order asks, terminate the rest.
    None when nothing was lost (or the attempt no longer runs)."""
    reported = machines_of(vm)
    if reported is None:
        return None
    attempt = (
        await session.execute(select(Attempt).where(Attempt.id == attempt_id).with_for_update())
    ).scalar_one_or_none()
    if attempt is None or attempt.status is not AttemptStatus.RUNNING:
        return None
    after = merged(attempt.machines, reported)
    lost = newly_lost(attempt.machines, after)
    if after != attempt.machines:
        attempt.machines = after
    if not lost:
        return None
    order = await session.get(Order, attempt.order_id)
    assert order is not None  # foreign key
    terminating = order.on_node_lost is NodeLostPolicy.TERMINATE
    left = sum(1 for m in after if m.get("state") not in ENDED_STATES)
    nodes = ", ".join(f"{m['id']} ({m.get('provider_status')})" for m in lost)
    then = (
        "terminating the rest, as the order asks (on_node_lost: terminate)."
        if terminating
        else "the rest runs on and is billed as before; terminate the order to end them all."
    )
    await timeline.write(
        session,
        Line(
            order.id,
            OrderEventKind.NODE_LOST,
            f"{display_name(attempt.provider)} lost {len(lost)} of the cluster's "
            f"{len(after)} nodes ({nodes}); {left} left: {then}",
        ),
    )
    await outbox.emit(session, order_id=order.id, event_type=WebhookEventType.ORDER_NODE_LOST)
    await session.flush()
    if terminating:
        try:
            await terminations.request(
                session,
                order_id=order.id,
                account_id=None,
                reason=TerminateReason.NODE_LOST,
                now=now,
            )
        except Conflict:
            terminating = False  # it ended meanwhile
    return NodesLost(order.id, tuple(m["id"] for m in lost), terminating)
