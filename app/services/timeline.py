"""Order timelines: the one way a line is written to one."""

from typing import NamedTuple, cast

from sqlalchemy import Connection, Table, insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.clock import utcnow
from app.core.ids import new_id
from app.core.states import OrderEventKind
from app.storage.models import OrderEvent

# Built once: one claim commit on the deploy path writes through it.
_INSERT = insert(cast(Table, OrderEvent.__table__))


class Line(NamedTuple):
    """One line of an order's timeline: what happened, in a sentence a person reads."""

    order_id: str
    kind: OrderEventKind
    message: str


async def write(session: AsyncSession, *lines: Line) -> None:
    """Append lines to order timelines (in the caller's transaction), in one statement."""
    if lines:
        await (await session.connection()).execute(_INSERT, _rows(lines))


def write_on(connection: Connection, *lines: Line) -> None:
    """`write` in a transaction of a synchronous connection (the claim's one hop)."""
    if lines:
        connection.execute(_INSERT, _rows(lines))


def _rows(lines: tuple[Line, ...]) -> list[dict[str, object]]:
    now = utcnow()
    return [
        {
            "id": new_id("evt"),
            "order_id": line.order_id,
            "kind": line.kind,
            "message": line.message[:1000],
            "created_at": now,
        }
        for line in lines
    ]
