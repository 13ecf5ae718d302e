"""The claim's database rules: one open attempt per kind where VMs have no name."""

from decimal import Decimal

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Provider
from app.core.states import OrderStatus
from app.providers.base import VM, Offer, VMState
from app.services import attempts
from app.services.claims import KindBusy
from app.storage.db import create_sessionmaker, session_scope
from tests.factories import HYPER_L40S, QUANTA_L40S, claim, claimed, order_status, waiting_orders

QUANTA = Provider("quantacloud")
QUANTA_H100 = Offer(QUANTA, "us-east-1", "h100-sxm-x1", "H100", 1, Decimal("2.00"))


async def test_one_open_attempt_per_kind_where_vms_have_no_name(engine: AsyncEngine) -> None:
    first, second = await waiting_orders(engine, QUANTA_L40S, 2)
    maker = create_sessionmaker(engine)
    one = await claim(engine, first, QUANTA_L40S)
    with pytest.raises(KindBusy):
        await claim(engine, second, QUANTA_L40S)
    assert await order_status(engine, second) == OrderStatus.WAITING  # rolled back, hold and all
    async with session_scope(maker) as session:
        await attempts.mark_unknown(session, attempt_id=one.attempt_id, message="500")
    with pytest.raises(KindBusy):  # unclear is still open
        await claim(engine, second, QUANTA_L40S)
    async with session_scope(maker) as session:
        busy = await attempts.open_serial_kinds(session)
    assert busy == {("quantacloud", "us-east-1", "l40s-x1")}
    async with session_scope(maker) as session:
        await attempts.settle_created(
            session, attempt_id=one.attempt_id, vm=VM(QUANTA, "dep_1", VMState.PENDING, "BUILD")
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
    statuses = {await order_status(engine, i.order_id) for i in intents}
    assert statuses == {OrderStatus.DEPLOYING}
