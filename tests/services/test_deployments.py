"""The deploy protocol's database rules: one owner per VM, one open attempt per unnamed kind."""

from decimal import Decimal

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.catalogue import Provider
from app.db import create_sessionmaker, session_scope
from app.models import Deployment, LedgerEntry, LedgerKind, Order
from app.providers.base import VM, Offer, VMState
from app.services import deployments
from app.services.deployments import KindBusy, VMAlreadyOwned
from app.states import DeploymentStatus, OrderStatus
from tests.factories import claim, claimed, waiting_orders

QUANTA_L40S = Offer(Provider("quantacloud"), "us-east-1", "l40s-x1", "L40S", 1, Decimal("1.10"))
QUANTA_H100 = Offer(Provider("quantacloud"), "us-east-1", "h100-sxm-x1", "H100", 1, Decimal("2.00"))
HYPER_L40S = Offer(Provider("hyperstack"), "CANADA-1", "n3-L40Sx1", "L40S", 1, Decimal("1.10"))


def _vm(vm_id: str, provider: Provider = Provider("hyperstack")) -> VM:
    return VM(provider, vm_id, VMState.PENDING, "BUILD")


async def _status(engine: AsyncEngine, order_id: str) -> str:
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await session.get(Order, order_id)
        assert order is not None
        return order.status


async def test_a_vm_owned_by_one_attempt_is_refused_to_another(engine: AsyncEngine) -> None:
    one, two = await claimed(engine, HYPER_L40S, HYPER_L40S)
    second = two.order_id
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        assert await deployments.settle_created(session, deployment_id=one.deployment_id,
                                                vm=_vm("vm-1"))  # fmt: skip
    async with session_scope(maker) as session:
        with pytest.raises(VMAlreadyOwned):
            await deployments.settle_created(
                session, deployment_id=two.deployment_id, vm=_vm("vm-1")
            )
        # The refusal leaves the unit of work usable: nothing of it was written.
        attempt = await session.get(Deployment, two.deployment_id, populate_existing=True)
        assert attempt is not None and attempt.status == DeploymentStatus.CREATING
    assert await _status(engine, second) == OrderStatus.DEPLOYING
    async with session_scope(maker) as session:
        debits = await session.scalar(
            select(func.count())
            .select_from(LedgerEntry)
            .where(LedgerEntry.order_id == second, LedgerEntry.kind == LedgerKind.DEBIT)
        )
    assert debits == 0
    # Positive control: the same attempt records a VM of its own.
    async with session_scope(maker) as session:
        assert await deployments.settle_created(
            session, deployment_id=two.deployment_id, vm=_vm("vm-2")
        )
    assert await _status(engine, second) == OrderStatus.DEPLOYED


async def test_the_same_vm_id_at_another_provider_is_another_vm(
    engine: AsyncEngine,
) -> None:
    one, two = await claimed(engine, HYPER_L40S, QUANTA_L40S)
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        await deployments.settle_created(session, deployment_id=one.deployment_id, vm=_vm("42"))
    async with session_scope(maker) as session:  # the same id at another provider
        assert await deployments.settle_created(
            session, deployment_id=two.deployment_id, vm=_vm("42", Provider("quantacloud"))
        )


async def test_one_open_attempt_per_kind_where_vms_have_no_name(engine: AsyncEngine) -> None:
    first, second = await waiting_orders(engine, QUANTA_L40S, 2)
    maker = create_sessionmaker(engine)
    one = await claim(engine, first, QUANTA_L40S)
    with pytest.raises(KindBusy):
        await claim(engine, second, QUANTA_L40S)
    assert await _status(engine, second) == OrderStatus.WAITING  # rolled back, hold and all
    async with session_scope(maker) as session:
        await deployments.mark_unknown(session, deployment_id=one.deployment_id, message="500")
    with pytest.raises(KindBusy):  # unclear is still open
        await claim(engine, second, QUANTA_L40S)
    async with session_scope(maker) as session:
        busy = await deployments.open_serial_kinds(session)
    assert busy == {("quantacloud", "us-east-1", "l40s-x1")}
    async with session_scope(maker) as session:
        await deployments.settle_created(
            session, deployment_id=one.deployment_id, vm=_vm("dep_1", Provider("quantacloud"))
        )
    two = await claim(engine, second, QUANTA_L40S)  # resolved: the kind is free again
    assert two.order_id == second


async def test_other_kinds_and_providers_with_names_are_not_serialized(
    engine: AsyncEngine,
) -> None:
    intents = await claimed(
        engine,
        QUANTA_L40S,
        QUANTA_H100,  # another kind at the same provider
        HYPER_L40S,
        HYPER_L40S,  # VMs there carry names: no need to wait
    )
    statuses = {await _status(engine, i.order_id) for i in intents}
    assert statuses == {OrderStatus.DEPLOYING}
