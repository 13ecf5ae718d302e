"""The deploy protocol's database rules: one owner per VM, one open attempt per unnamed kind."""

from decimal import Decimal

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.catalogue import Provider
from app.db import create_sessionmaker, session_scope
from app.models import Deployment, DeploymentStatus, LedgerEntry, LedgerKind, Order, OrderStatus
from app.providers.base import VM, Offer, VMState
from app.schemas import OrderCreate
from app.services import accounts, deployments, ledger, orders
from app.services.deployments import Intent, KindBusy, VMAlreadyOwned

QUANTA_L40S = Offer(Provider.QUANTACLOUD, "us-east-1", "l40s-x1", "L40S", 1, Decimal("1.10"))
QUANTA_H100 = Offer(Provider.QUANTACLOUD, "us-east-1", "h100-sxm-x1", "H100", 1, Decimal("2.00"))
HYPER_L40S = Offer(Provider.HYPERSTACK, "CANADA-1", "n3-L40Sx1", "L40S", 1, Decimal("1.10"))


async def _orders(engine: AsyncEngine, count: int) -> list[str]:
    """`count` waiting orders that accept any provider, from an account with credit."""
    request = OrderCreate.model_validate(
        {"gpu_model": "L40S", "gpu_count": 1, "max_price_per_hour": "5",
         "providers": ["verda", "hyperstack", "quantacloud"]}
    )  # fmt: skip
    async with session_scope(create_sessionmaker(engine)) as session:
        account, _key = await accounts.create_account(session, name="rules")
        await ledger.credit(session, account_id=account.id, amount=Decimal(100))
        placed = [
            await orders.place_order(session, account_id=account.id, request=request)
            for _ in range(count)
        ]
    return [order.id for order in placed]


async def _claim(engine: AsyncEngine, order_id: str, offer: Offer) -> Intent:
    async with session_scope(create_sessionmaker(engine)) as session:
        intent = await deployments.claim(
            session, order_id=order_id, offer=offer, price_with_fees=offer.price_per_hour
        )
    assert intent is not None
    return intent


def _vm(vm_id: str, provider: Provider = Provider.HYPERSTACK) -> VM:
    return VM(provider, vm_id, VMState.PENDING, "BUILD")


async def _status(engine: AsyncEngine, order_id: str) -> str:
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await session.get(Order, order_id)
        assert order is not None
        return order.status


async def test_a_vm_owned_by_one_attempt_is_refused_to_another(engine: AsyncEngine) -> None:
    first, second = await _orders(engine, 2)
    one = await _claim(engine, first, HYPER_L40S)
    two = await _claim(engine, second, HYPER_L40S)
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
    first, second = await _orders(engine, 2)
    one = await _claim(engine, first, HYPER_L40S)
    two = await _claim(engine, second, QUANTA_L40S)
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        await deployments.settle_created(session, deployment_id=one.deployment_id, vm=_vm("42"))
    async with session_scope(maker) as session:  # the same id at another provider
        assert await deployments.settle_created(
            session, deployment_id=two.deployment_id, vm=_vm("42", Provider.QUANTACLOUD)
        )


async def test_one_open_attempt_per_kind_where_vms_have_no_name(engine: AsyncEngine) -> None:
    first, second = await _orders(engine, 2)
    maker = create_sessionmaker(engine)
    one = await _claim(engine, first, QUANTA_L40S)
    with pytest.raises(KindBusy):
        await _claim(engine, second, QUANTA_L40S)
    assert await _status(engine, second) == OrderStatus.WAITING  # rolled back, hold and all
    async with session_scope(maker) as session:
        await deployments.mark_unknown(session, deployment_id=one.deployment_id, message="500")
    with pytest.raises(KindBusy):  # unclear is still open
        await _claim(engine, second, QUANTA_L40S)
    async with session_scope(maker) as session:
        busy = await deployments.open_serial_kinds(session)
    assert busy == {("quantacloud", "us-east-1", "l40s-x1")}
    async with session_scope(maker) as session:
        await deployments.settle_created(
            session, deployment_id=one.deployment_id, vm=_vm("dep_1", Provider.QUANTACLOUD)
        )
    two = await _claim(engine, second, QUANTA_L40S)  # resolved: the kind is free again
    assert two.order_id == second


async def test_other_kinds_and_providers_with_names_are_not_serialized(
    engine: AsyncEngine,
) -> None:
    first, second, third, fourth = await _orders(engine, 4)
    await _claim(engine, first, QUANTA_L40S)
    await _claim(engine, second, QUANTA_H100)  # another kind at the same provider
    await _claim(engine, third, HYPER_L40S)
    await _claim(engine, fourth, HYPER_L40S)  # VMs there carry names: no need to wait
    statuses = {await _status(engine, o) for o in (first, second, third, fourth)}
    assert statuses == {OrderStatus.DEPLOYING}
