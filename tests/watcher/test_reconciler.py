"""The reconciler: no hold stays open without an attempt, no VM of ours goes unnoticed."""

import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from decimal import Decimal

import httpx
import pytest
from prometheus_client import REGISTRY
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Provider
from app.core.clock import utcnow
from app.core.states import HoldStatus, OrderEventKind
from app.providers.base import Offer, ProviderAdapter
from app.providers.registry import build_adapters
from app.services import accounts, attempts, ledger, terminations
from app.settings import Settings
from app.simulators.control import SimControl
from app.storage.db import create_read_sessionmaker, create_sessionmaker, session_scope
from app.storage.models import Hold
from app.watcher.context import WatcherContext
from app.watcher.reconciler import Reconciler
from tests.factories import claimed

GRACE = 0.3


@pytest.fixture
async def adapters(settings: Settings) -> AsyncIterator[dict[Provider, ProviderAdapter]]:
    async with httpx.AsyncClient() as client:
        yield build_adapters(settings, client)


def reconciler(
    engine: AsyncEngine,
    adapters: dict[Provider, ProviderAdapter],
    *,
    delete: bool,
    later: float = 0.0,
) -> Reconciler:
    """A reconciler whose clock runs `later` seconds ahead of the simulators'."""
    return Reconciler(
        WatcherContext(
            adapters=adapters,
            sessionmaker=create_sessionmaker(engine),
            read_sessionmaker=create_read_sessionmaker(engine),
            clock=lambda: utcnow() + timedelta(seconds=later),
        ),
        grace_seconds=GRACE,
        delete_untracked=delete,
    )


# Creation times are whole seconds, so the grace is rounded up: this far on, a VM made now is
# past it.
PAST_GRACE = GRACE + 1.1


async def test_a_hold_without_an_attempt_is_released(
    engine: AsyncEngine, adapters: dict[Provider, ProviderAdapter], sim: SimControl
) -> None:
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        account, _key = await accounts.create_account(session, name="stray")
        await ledger.credit(session, account_id=account.id, amount=Decimal(50))
        hold = await ledger.place_hold(session, account_id=account.id, amount=Decimal(20))
    await reconciler(engine, adapters, delete=False).tick()
    async with session_scope(maker) as session:
        stored = await session.get(Hold, hold.id)
        assert stored is not None and stored.status == HoldStatus.RELEASED
        refreshed = await accounts.get_account(session, account_id=account.id)
        assert (refreshed.balance, refreshed.held) == (Decimal(50), Decimal(0))


async def test_a_vm_of_ours_no_order_owns_is_reported_and_deleted_when_allowed(
    engine: AsyncEngine, adapters: dict[Provider, ProviderAdapter], sim: SimControl
) -> None:
    await sim.config("hyperstack", boot_seconds=0)  # created at once: Hyperstack may delete it
    await sim.stock("hyperstack", "n3-H100x1", "CANADA-1", 1)
    (offer,) = [
        o for o in await adapters[Provider("hyperstack")].fetch_offers() if o.sku == "n3-H100x1"
    ]
    stray = await adapters[Provider("hyperstack")].create_vm(
        offer, name="ap-nobodys-1", tag="ap-order-nobodys", ssh_public_key=None
    )
    await reconciler(engine, adapters, delete=False).tick()
    assert _untracked("hyperstack") == 0  # too young: a create in flight may still claim it
    await reconciler(engine, adapters, delete=False, later=PAST_GRACE).tick()
    assert _untracked("hyperstack") == 1
    assert [vm["status"] for vm in await sim.vms("hyperstack")] != ["DELETING"]
    await reconciler(engine, adapters, delete=True, later=PAST_GRACE).tick()
    (vm,) = await sim.vms("hyperstack")
    assert str(vm["id"]) == stray.id and vm["status"] in ("DELETING", "DELETED")


async def test_quantacloud_deployments_are_reported_but_never_deleted(
    engine: AsyncEngine, adapters: dict[Provider, ProviderAdapter], sim: SimControl
) -> None:
    await sim.stock("quantacloud", "l40s-x1", "us-east-1", 1)
    (offer,) = [
        o for o in await adapters[Provider("quantacloud")].fetch_offers() if o.sku == "l40s-x1"
    ]
    await adapters[Provider("quantacloud")].create_vm(
        offer, name="ap-x-1", tag="ap-order-x", ssh_public_key=None
    )
    await reconciler(engine, adapters, delete=True, later=PAST_GRACE).tick()
    assert _untracked("quantacloud") == 1
    (attempt,) = await sim.vms("quantacloud")
    assert attempt["status"] not in ("stopping", "terminated")


def _untracked(provider: str) -> float:
    return REGISTRY.get_sample_value("autoprovision_untracked_vms", {"provider": provider}) or 0.0


async def test_a_vm_made_after_its_attempt_was_released_is_deleted(
    engine: AsyncEngine, adapters: dict[Provider, ProviderAdapter], sim: SimControl
) -> None:
    offer = Offer(Provider("hyperstack"), "CANADA-1", "n3-H100x1", "H100", 1, Decimal("2.40"))
    (intent,) = await claimed(engine, offer)
    async with session_scope(create_sessionmaker(engine)) as session:
        await attempts.settle_not_created(
            session,
            attempt_id=intent.attempt_id,
            kind=OrderEventKind.NOT_CREATED,
            message="none",
        )
    await sim.stock("hyperstack", "n3-H100x1", "CANADA-1", 1)
    (live,) = [
        o for o in await adapters[Provider("hyperstack")].fetch_offers() if o.sku == "n3-H100x1"
    ]
    late = await adapters[Provider("hyperstack")].create_vm(
        live, name=intent.vm_name, tag=intent.tag, ssh_public_key=None
    )
    await reconciler(engine, adapters, delete=False).tick()
    (vm,) = await sim.vms("hyperstack")  # still being created: Hyperstack refuses the delete
    assert str(vm["id"]) == late.id and vm["status"] in ("CREATING", "BUILD")
    await sim.config("hyperstack", boot_seconds=0)  # created now: the next sweep deletes it
    await reconciler(engine, adapters, delete=False).tick()
    (vm,) = await sim.vms("hyperstack")
    assert str(vm["id"]) == late.id and vm["status"] in ("DELETING", "DELETED")


async def test_a_vm_no_order_owns_is_reported_past_the_grace_naming_its_possible_attempt(
    engine: AsyncEngine,
    adapters: dict[Provider, ProviderAdapter],
    sim: SimControl,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A QuantaCloud VM no order owns, while an unclear create of its kind is open: reported
    on the first sweep past the grace (so within the grace plus one period), with the attempt
    it may have come from."""
    offer = Offer(Provider("quantacloud"), "us-east-1", "l40s-x1", "L40S", 1, Decimal("1.14"))
    (intent,) = await claimed(engine, offer)
    async with session_scope(create_sessionmaker(engine)) as session:
        await attempts.mark_unknown(session, attempt_id=intent.attempt_id, message="500")
    await sim.stock("quantacloud", "l40s-x1", "us-east-1", 1)
    (live,) = [
        o for o in await adapters[Provider("quantacloud")].fetch_offers() if o.sku == "l40s-x1"
    ]
    vm = await adapters[Provider("quantacloud")].create_vm(
        live, name="-", tag="-", ssh_public_key=None
    )
    caplog.set_level(logging.WARNING, logger="app.watcher.reconciler")
    await reconciler(engine, adapters, delete=False, later=GRACE - 0.2).tick()
    assert _untracked("quantacloud") == 0 and not caplog.records  # within the grace
    await reconciler(engine, adapters, delete=False, later=PAST_GRACE).tick()
    assert _untracked("quantacloud") == 1
    (report,) = [r.getMessage() for r in caplog.records]
    assert vm.id in report and "no order owns it" in report
    assert f"attempt 1 of {intent.order_id} (unknown)" in report


async def test_a_vm_an_ended_order_still_finds_is_deleted_again_or_reported(
    engine: AsyncEngine,
    adapters: dict[Provider, ProviderAdapter],
    sim: SimControl,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An order lost to a suspended VM whose delete did not stick: each sweep deletes it, and
    says so when the provider refuses."""
    await sim.config("hyperstack", boot_seconds=0)
    await sim.stock("hyperstack", "n3-H100x1", "CANADA-1", 1)
    adapter = adapters[Provider("hyperstack")]
    (offer,) = [o for o in await adapter.fetch_offers() if o.sku == "n3-H100x1"]
    (intent,) = await claimed(engine, offer)
    vm = await adapter.create_vm(offer, name=intent.vm_name, tag=intent.tag, ssh_public_key=None)
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        await attempts.settle_created(session, attempt_id=intent.attempt_id, vm=vm)
        await attempts.settle_running(session, attempt_id=intent.attempt_id, vm=vm)
    await sim.end_vm("hyperstack", vm.id)
    async with session_scope(maker) as session:
        await terminations.settle_lost(
            session, attempt_id=intent.attempt_id, seen_at=utcnow(), reported="SUSPENDED"
        )
    await sim.fault("hyperstack", "delete_refused")
    with caplog.at_level(logging.WARNING, logger="app.watcher.reconciler"):
        await reconciler(engine, adapters, delete=False).tick()
    (still,) = await sim.vms("hyperstack")
    assert still["status"] == "SUSPENDED"
    assert any(
        f"VM {vm.id} of ended order {intent.order_id} is still there and cannot be deleted"
        in r.getMessage()
        for r in caplog.records
    )
    await reconciler(engine, adapters, delete=False).tick()  # the next sweep deletes it
    (gone,) = await sim.vms("hyperstack")
    assert gone["status"] in ("DELETING", "DELETED")
