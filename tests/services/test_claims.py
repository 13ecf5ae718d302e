"""The claim's database rules: one open attempt per kind where VMs have no name."""

from dataclasses import replace
from decimal import Decimal

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Provider
from app.core.states import OrderStatus
from app.providers.base import VM, Boots, Offer, VMState
from app.services import attempts
from app.services.claims import KindBusy, boot_image
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


class TestBootImage:
    """Which image a claimed create boots, and what its timeline line says of it."""

    B200 = Offer(Provider("hyperstack"), "CANADA-1", "n3-B200-SXM6x8", "B200", 8, Decimal("38"))
    BOOTS = Boots(
        images=(("r580", 580), ("r570", 570), ("unsaid", None)),
        configured="r535",
        gpu_min_driver=570,
    )

    def test_the_order_s_image_else_the_configured_else_the_best_and_why(self) -> None:
        offer = replace(self.B200, boots=self.BOOTS)
        assert boot_image(offer, "r570", 580) == ("r570", "")  # named: the order's to choose
        assert boot_image(self.B200, None, None) == (None, "")  # not known: the configured
        assert boot_image(offer, None, None) == (
            "r580",
            " Boots r580: the configured r535 does not run 8x B200 there.",
        )
        runs = replace(self.BOOTS, images=(("r570", 570), ("r580", 580)), configured="r570")
        assert boot_image(replace(offer, boots=runs), None, None) == ("r570", "")
        assert boot_image(replace(offer, boots=runs), None, 580) == (
            "r580",
            " Boots r580: the configured r570 has R570; the serve script needs R580 or newer.",
        )
        unsaid = replace(self.BOOTS, configured="unsaid")
        assert boot_image(replace(offer, boots=unsaid), None, None) == (
            "r580",
            " Boots r580: the configured unsaid has an unknown driver; B200 needs R570 or newer.",
        )
