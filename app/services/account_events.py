"""The account's own timeline: things that happened outside any order."""

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.ids import new_id
from app.storage.models import AccountEvent


def add(session: AsyncSession, *, account_id: str, kind: str, message: str) -> AccountEvent:
    """Append an event to the account's timeline (in the caller's transaction)."""
    event = AccountEvent(id=new_id("aev"), account_id=account_id, kind=kind, message=message)
    session.add(event)
    return event


async def list_events(
    session: AsyncSession, *, account_id: str, cursor: str | None, limit: int
) -> list[AccountEvent]:
    """The account's events, newest first, starting after `cursor`."""
    statement = select(AccountEvent).where(AccountEvent.account_id == account_id)
    if cursor is not None:
        statement = statement.where(AccountEvent.id < cursor)
    return list(
        (await session.execute(statement.order_by(AccountEvent.id.desc()).limit(limit))).scalars()
    )
