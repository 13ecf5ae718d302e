"""The account's events: live as Server-Sent Events, or a page at a time."""

from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Annotated

import anyio
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncSession
from sse_starlette import ServerSentEvent
from starlette.background import BackgroundTask

from app.api.deps import CurrentAccount, SessionDep, SettingsDep
from app.api.event_stream import EventStream
from app.api.strict_json import StrictJsonRoute
from app.core.errors import AppError, TooManyRequests
from app.services import published_events
from app.services.order_payload import OrderSnapshotOut
from app.stream.hub import Hub, Listener, TooManyStreams

router = APIRouter(route_class=StrictJsonRoute, prefix="/v1/events", tags=["events"])
STREAM_PAGE = 100
MAX_EVENT_ID = 2**63 - 1


class EventOut(BaseModel):
    """One event of the account: an order's timeline line, or something about the account."""

    id: int = Field(
        description="The account's own count of its events (1, 2, ...); resume after it "
        "with Last-Event-ID."
    )
    type: str = Field(
        description="order.placed, order.deploying, order.deployed, order.running, "
        "order.progress, order.ready, order.not_ready, order.failed, order.cancelled, "
        "order.expired, order.note, or account.<kind>."
    )
    kind: str = Field(description="The timeline line's kind (e.g. `no_capacity` for a note).")
    timestamp: datetime
    order_id: str | None
    message: str
    data: OrderSnapshotOut | None = Field(
        description="The order as it was when the event was published (null for account.*), "
        "its SSH key as `ssh_key_fingerprint` only."
    )


class EventPage(BaseModel):
    """Events oldest first; pass `next_cursor` as `after` for the next ones."""

    data: list[EventOut]
    next_cursor: int


@router.get("", response_model=EventPage)
async def list_events(
    account: CurrentAccount,
    session: SessionDep,
    after: Annotated[int, Query(ge=0, le=MAX_EVENT_ID, description="An event id.")] = 0,
    limit: Annotated[int, Query(ge=1, le=100, description="How many events.")] = 100,
) -> Response:
    """The account's events after `after`, oldest first (for clients that cannot hold a
    stream); `next_cursor` is the last id given, or `after` when there is nothing new."""
    events = await published_events.after(
        session, account_id=account.id, after_id=after, limit=limit
    )
    cursor = events[-1].id if events else after
    body = f'{{"data":[{",".join(e.json for e in events)}],"next_cursor":{cursor}}}'
    return Response(body, media_type="application/json")


def _resume_from(last_event_id: str | None) -> int | None:
    if last_event_id is None or not last_event_id.strip():
        return None
    digits = last_event_id.strip().lstrip("0") or "0"
    # Length before int(): 4,300 digits or more make it raise instead of answering.
    too_long = len(digits) > len(str(MAX_EVENT_ID))
    if too_long or not digits.isascii() or not digits.isdigit() or int(digits) > MAX_EVENT_ID:
        raise AppError(
            "Last-Event-ID must be the id of an event this stream sent (a whole number)",
            code="bad_last_event_id",
        )
    return int(digits)


@router.get(
    "/stream",
    response_class=EventStream,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "Events as they happen."},
        429: {"description": "The account has too many streams open."},
    },
)
async def stream_events(
    request: Request,
    account: CurrentAccount,
    session: SessionDep,
    settings: SettingsDep,
    last_event_id: Annotated[
        str | None, Header(description="Resume after this event id (what the stream sent).")
    ] = None,
) -> EventStream:
    """Every event of the account as it happens (Server-Sent Events; `id`, `event` = type,
    `data` = the event's JSON). Send `Last-Event-ID` to resume after that event without a
    gap or a repeat; without it, the stream starts after the newest event. The first line is
    the comment `: heartbeat 15`, and a comment comes that often, so proxies keep it open and
    a client that hears nothing for longer can tell the connection is dead."""
    cursor = _resume_from(last_event_id)
    # Against every id given, not the newest kept: events pruned after 30 days leave ids
    # that clients still hold, and resuming after one of them is fine.
    given = await published_events.newest_of(session, account_id=account.id)
    if cursor is None:
        cursor = given
    elif cursor > given:
        raise AppError(
            f"Last-Event-ID {cursor} is newer than the newest event ({given})",
            code="bad_last_event_id",
        )
    hub: Hub = request.app.state.hub
    try:
        listener = hub.listen(account.id)
    except TooManyStreams as exc:
        raise TooManyRequests(f"{exc}; close one first", code="too_many_streams") from exc
    return EventStream(
        _events(
            request.app.state.read_sessionmaker,
            hub,
            listener,
            cursor,
            heartbeat=settings.stream_heartbeat_seconds,
        ),
        ping=settings.stream_heartbeat_seconds,
        send_timeout=settings.stream_send_timeout_seconds,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        # The listener goes with the response, however it ends (even never started).
        background=BackgroundTask(hub.stop_listening, listener),
    )


async def _events(
    read_sessionmaker: Callable[[], AbstractAsyncContextManager[AsyncSession]],
    hub: Hub,
    listener: Listener,
    cursor: int,
    *,
    heartbeat: float,
) -> AsyncGenerator[ServerSentEvent, None]:
    """The account's events after `cursor`, then each new one as the publisher wakes us."""
    try:
        # First, how often a heartbeat comes: a client that hears nothing for longer knows
        # the connection is dead even when no FIN reached it (a laptop asleep, a lost route).
        yield ServerSentEvent(comment=f"heartbeat {heartbeat:g}")
        while True:
            listener.wake.clear()  # before the read: a wake during it waits for the next wait
            # Shielded: a disconnect cancels the stream, and a cancel inside the session's
            # rollback or close leaves its connection half returned (and a traceback). The
            # read is short and bounded by the pool timeout; the cancel lands right after it.
            with anyio.CancelScope(shield=True):
                async with hub.reading, read_sessionmaker() as session:
                    events = await published_events.after(
                        session,
                        account_id=listener.account_id,
                        after_id=cursor,
                        limit=STREAM_PAGE,
                    )
            for event in events:
                yield ServerSentEvent(data=event.json, id=str(event.id), event=event.type)
                cursor = event.id
            if len(events) < STREAM_PAGE:
                await listener.wake.wait()
    finally:
        hub.stop_listening(listener)
