"""The claim's database rules: one open attempt per kind where VMs have no name."""

from dataclasses import replace
from decimal import Decimal

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Provider
from app.core.states import OrderStatus
from app.providers.base import VM, Boots, Offer, VMState
from app.services import attempts, claims
from app.services.claims import KindBusy, boot_image
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Account, Order
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


async def test_a_claim_whose_hour_would_pass_the_orders_total_claims_nothing(
    engine: AsyncEngine,
) -> None:
    # The matcher leaves such offers out; the claim holds the limit as the row has it when it
    # commits, whatever the book read before.
    (order_id,) = await waiting_orders(engine, HYPER_L40S, credit=100)
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        await session.execute(
            update(Order).where(Order.id == order_id).values(max_total_usd=Decimal("1.00"))
        )
    hour = Decimal("1.01")
    async with session_scope(maker) as session:
        intent = await claims.claim(
            session, order_id=order_id, offer=HYPER_L40S, price_with_fees=hour
        )
    assert intent is None
    assert await order_status(engine, order_id) == OrderStatus.WAITING
    async with session_scope(maker) as session:
        account = await session.scalar(select(Account).join(Order).where(Order.id == order_id))
    assert account is not None and account.held == Decimal(0)  # no hour held
    async with session_scope(maker) as session:  # control: an hour within it is claimed
        within = await claims.claim(
            session, order_id=order_id, offer=HYPER_L40S, price_with_fees=Decimal("1.00")
        )
    assert within is not None and within.price_with_fees == Decimal("1.00")


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
