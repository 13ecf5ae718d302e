"""Start-up scripts kept apart from VMs are deleted once their VM is gone, whichever way it goes,
and the reconciler deletes those whose delete did not happen; in memory, on a FakeAdapter that
keeps scripts as Verda does. Nothing sleeps."""

import asyncio

import pytest
from pydantic import SecretStr
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.states import OrderStatus
from app.providers import fake, registry
from app.providers.base import NoCapacity, Unavailable, VMState
from app.providers.fake import Create
from app.settings import Settings
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Order, OrderEvent
from tests.factories import waiting_orders
from tests.watcher.in_memory import SETTINGS, InMemory, OnFakeAdapter

SCRIPT = "#!/bin/sh\necho ready\n"
OTHER_KEY = "5oBn6Ml0mQhQeL2Oa3jQj3X2k0u9mJ3d8yWlV6T2JcE="  # a Fernet key, not the test key's


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Unclear creates are looked up at the first follow."""
    return settings.model_copy(update={"outcome_check_seconds": 0.0})


async def scripted(memory: InMemory) -> str:
    (order_id,) = await waiting_orders(memory.engine, memory.offer, startup_script=SCRIPT)
    await memory.watcher.refresh_waiting()
    return order_id


def name_of(order_id: str, attempt: int = 1) -> str:
    return f"ap-{order_id.removeprefix('ord_')}-{attempt}"


async def test_the_script_goes_when_the_provider_ends_the_running_vm(memory: InMemory) -> None:
    order_id = await scripted(memory)
    await memory.poll(memory.offer)
    (create,) = memory.fake.creates
    assert create.startup_script == SCRIPT
    assert create.vm_id is not None
    memory.fake.advance(create.vm_id, VMState.RUNNING, ip="192.0.2.10")
    await memory.watcher.follower.tick()
    await memory.watcher.running.tick()
    assert await memory.status(order_id) == OrderStatus.RUNNING
    assert memory.fake.startup_scripts == {name_of(order_id): SCRIPT}  # kept while it runs

    memory.fake.advance(create.vm_id, VMState.GONE)
    await memory.watcher.running.tick()
    assert await memory.status(order_id) == OrderStatus.LOST
    assert memory.fake.deleted_scripts == [name_of(order_id)]


async def test_the_script_goes_when_an_unclear_create_made_no_vm(memory: InMemory) -> None:
    order_id = await scripted(memory)
    memory.fake.queue(Create.unknown(made_vm=False))
    await memory.poll(memory.offer)
    assert memory.fake.startup_scripts == {name_of(order_id): SCRIPT}  # not known to be gone
    await memory.watcher.follower.tick()
    assert memory.fake.deleted_scripts == [name_of(order_id)]
    assert await memory.status(order_id) == OrderStatus.WAITING


async def test_a_script_whose_delete_failed_is_deleted_by_the_reconciler(
    memory: InMemory,
) -> None:
    order_id = await scripted(memory)
    memory.fake.queue(Create.fails(NoCapacity))
    memory.fake.fail_script_deletes(Unavailable)
    await memory.poll(memory.offer)
    assert memory.fake.startup_scripts == {name_of(order_id): SCRIPT}  # its delete failed
    memory.clock.advance(10.0)  # past the capacity cool-down: the second attempt deploys
    await memory.poll(memory.offer)
    assert await memory.status(order_id) == OrderStatus.DEPLOYED
    assert set(memory.fake.startup_scripts) == {name_of(order_id, 1), name_of(order_id, 2)}

    await memory.watcher.reconciler.tick()
    # Only the script whose attempt ended goes; the one of the VM still booting stays.
    assert memory.fake.startup_scripts == {name_of(order_id, 2): SCRIPT}
    assert memory.fake.deleted_scripts == [name_of(order_id, 1)]


async def test_a_script_the_keys_cannot_open_fails_the_order_and_sends_nothing(
    engine: AsyncEngine, settings: Settings
) -> None:
    rekeyed = OnFakeAdapter(engine, settings, {**SETTINGS, "secret_key": SecretStr(OTHER_KEY)})
    offer = rekeyed.fake.offer(price="20.00")
    with registry.offering(fake.SPEC):
        (order_id,) = await waiting_orders(engine, offer, startup_script=SCRIPT)
    await rekeyed.watcher.refresh_waiting()
    await rekeyed.watcher.on_offers(rekeyed.fake.provider, [offer], rekeyed.clock())
    await asyncio.gather(*rekeyed.watcher.deployer.in_flight)
    assert rekeyed.fake.creates == []
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await session.get(Order, order_id)
        lines = (await session.scalars(select(OrderEvent.message))).all()
    assert order is not None and order.status == OrderStatus.FAILED
    assert [line for line in lines if "cannot be decrypted" in line] != []
