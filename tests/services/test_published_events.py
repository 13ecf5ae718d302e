"""Publishing timeline lines to the event stream: in time order, once, one publisher at a time."""

from datetime import UTC, datetime

import pytest
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.clock import utcnow
from app.core.states import OrderEventKind
from app.services import account_events, published_events, timeline
from app.services.timeline import Line
from app.storage.db import create_read_sessionmaker, create_sessionmaker, session_scope
from app.storage.models import AccountEvent, OrderEvent, PublishedEvent
from tests.factories import account_in_database, place_in_database

LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)


async def _line(engine: AsyncEngine, order_id: str, kind: OrderEventKind) -> None:
    async with session_scope(create_sessionmaker(engine)) as session:
        await timeline.write(session, Line(order_id, kind, f"{kind} happened."))


async def _account_event(engine: AsyncEngine, account_id: str, kind: str) -> None:
    async with session_scope(create_sessionmaker(engine)) as session:
        account_events.add(session, account_id=account_id, kind=kind, message=f"{kind}.")


async def _publish(engine: AsyncEngine, limit: int = published_events.PUBLISH_BATCH) -> int:
    async with session_scope(create_sessionmaker(engine)) as session:
        return await published_events.publish_pending(session, limit=limit)


async def _stream(engine: AsyncEngine, account_id: str) -> list[published_events.Event]:
    async with create_read_sessionmaker(engine)() as session:
        return await published_events.after(session, account_id=account_id, after_id=0, limit=1000)


async def test_each_line_is_published_once_in_time_order_with_its_stream_type(
    engine: AsyncEngine,
) -> None:
    account_id = await account_in_database(engine)
    order_id = await place_in_database(engine, account_id)
    for kind in (
        OrderEventKind.NO_CAPACITY,
        OrderEventKind.CREATE_SENT,
        OrderEventKind.DEPLOYED,
        OrderEventKind.RUNNING,
    ):
        await _line(engine, order_id, kind)
    await _account_event(engine, account_id, "webhook_endpoint_disabled")
    failed = await place_in_database(engine, account_id)
    await _line(engine, failed, OrderEventKind.REJECTED)

    assert await _publish(engine) == 8
    assert await _publish(engine) == 0  # nothing twice

    events = await _stream(engine, account_id)
    assert [e.type for e in events] == [
        "order.placed",
        "order.note",
        "order.deploying",
        "order.deployed",
        "order.running",
        "account.webhook_endpoint_disabled",
        "order.placed",
        "order.failed",
    ]
    assert [e.id for e in events] == sorted(e.id for e in events)
    note = events[1]
    assert f'"id":{note.id},' in note.json and '"kind":"no_capacity"' in note.json
    assert f'"order_id":"{order_id}"' in note.json and '"data":{' in note.json
    assert '"order_id":null' in events[5].json and '"data":null' in events[5].json


async def test_the_database_refuses_a_second_copy_of_a_line(engine: AsyncEngine) -> None:
    account_id = await account_in_database(engine)
    await place_in_database(engine, account_id)
    await _publish(engine)
    (published,) = await _stream(engine, account_id)
    async with engine.begin() as connection:
        source_id = (await connection.execute(select(PublishedEvent.source_id))).scalar_one()
        with pytest.raises(IntegrityError):
            await connection.execute(
                insert(PublishedEvent).values(
                    account_id=account_id,
                    type="order.placed",
                    source_id=source_id,
                    payload="{}",
                    created_at=utcnow(),
                    published_at=utcnow(),
                )
            )
    assert published.type == "order.placed"


async def test_a_batch_cut_short_keeps_the_time_order_of_both_kinds_of_line(
    engine: AsyncEngine,
) -> None:
    account_id = await account_in_database(engine)
    order_id = await place_in_database(engine, account_id)  # o1
    await _account_event(engine, account_id, "a2")
    await _line(engine, order_id, OrderEventKind.NO_CAPACITY)  # o3
    await _account_event(engine, account_id, "a4")
    await _line(engine, order_id, OrderEventKind.ABOVE_MAX)  # o5
    rounds = []
    while published := await _publish(engine, limit=2):
        rounds.append(published)
    events = await _stream(engine, account_id)
    assert [e.type for e in events] == [
        "order.placed",
        "account.a2",
        "order.note",
        "account.a4",
        "order.note",
    ]
    assert sum(rounds) == 5 and max(rounds) <= 4
    async with engine.connect() as connection:
        for model in (OrderEvent, AccountEvent):
            flags = (await connection.execute(select(model.published))).scalars().all()
            assert flags and all(flags)


async def test_on_postgresql_one_replica_publishes_at_a_time(
    engine: AsyncEngine, backend: str
) -> None:
    if backend != "postgres":
        pytest.skip("SQLite has one writer (one process) by itself")
    account_id = await account_in_database(engine)
    await place_in_database(engine, account_id)
    sessionmaker = create_sessionmaker(engine)
    async with session_scope(sessionmaker) as first:
        assert await published_events.publish_pending(first) == 1
        await place_in_database(engine, account_id)
        # The first has not committed: a second publisher must not number lines meanwhile.
        assert await _publish(engine) == 0
    assert await _publish(engine) == 1  # once the first is done, the next one publishes
    events = await _stream(engine, account_id)
    assert len(events) == 2 and events[0].id < events[1].id


async def test_events_older_than_the_cut_off_are_pruned_and_ids_never_come_back(
    engine: AsyncEngine,
) -> None:
    account_id = await account_in_database(engine)
    await place_in_database(engine, account_id)
    await _publish(engine)
    (first,) = await _stream(engine, account_id)
    async with session_scope(create_sessionmaker(engine)) as session:
        assert await published_events.prune(session, older_than=LONG_AGO) == 0
        assert await published_events.prune(session, older_than=utcnow()) == 1
    await place_in_database(engine, account_id)
    await _publish(engine)
    (second,) = await _stream(engine, account_id)
    assert second.id > first.id
