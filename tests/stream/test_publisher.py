"""The publisher: each round publishes what is pending and wakes the streams with news."""

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.storage.db import create_read_sessionmaker, create_sessionmaker
from app.stream.hub import Hub
from app.stream.publisher import Publisher
from tests.factories import account_in_database, place_in_database


def _publisher(engine: AsyncEngine) -> tuple[Publisher, Hub]:
    """A publisher with a hub of its own, as each replica has."""
    hub = Hub(per_account=5)
    publisher = Publisher(create_sessionmaker(engine), create_read_sessionmaker(engine), hub)
    return publisher, hub


async def test_a_round_publishes_and_wakes_the_streams_of_those_accounts_only(
    engine: AsyncEngine,
) -> None:
    publisher, hub = _publisher(engine)
    ada, bob = await account_in_database(engine), await account_in_database(engine, "Bob")
    ada_listens, bob_listens = hub.listen(ada), hub.listen(bob)
    await place_in_database(engine, ada)
    assert await publisher.run_once() == 1
    assert ada_listens.wake.is_set() and not bob_listens.wake.is_set()
    await place_in_database(engine, bob)  # the same round, now with news for Bob: the control
    assert await publisher.run_once() == 1
    assert bob_listens.wake.is_set()


async def test_a_replica_wakes_its_streams_for_events_another_one_published(
    engine: AsyncEngine, backend: str
) -> None:
    if backend != "postgres":
        pytest.skip("replicas share a PostgreSQL database")
    one, _ = _publisher(engine)
    two, hub_two = _publisher(engine)
    await two.start()
    await two.stop()  # only its starting position; rounds are driven below
    ada = await account_in_database(engine)
    listens_on_two = hub_two.listen(ada)
    await place_in_database(engine, ada)
    assert await one.run_once() == 1
    assert not listens_on_two.wake.is_set()
    assert await two.run_once() == 0  # nothing left to publish, but news to wake for
    assert listens_on_two.wake.is_set()
    assert two.position == one.position > 0


async def test_a_backlog_larger_than_a_batch_is_published_in_one_round(
    engine: AsyncEngine,
) -> None:
    _, hub = _publisher(engine)
    publisher = Publisher(
        create_sessionmaker(engine), create_read_sessionmaker(engine), hub, batch=2
    )
    ada = await account_in_database(engine)
    for _ in range(5):
        await place_in_database(engine, ada)
    assert await publisher.run_once() == 5
    assert await publisher.run_once() == 0
