"""The arithmetic of paying as a machine runs: hours, the providers' rounding, refunds, limits."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core import metering
from app.core.metering import BillingUnit

START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
VERDA = BillingUnit(blocks_per_hour=6)
HYPERSTACK = BillingUnit(blocks_per_hour=60)
QUANTACLOUD = BillingUnit(blocks_per_hour=1, from_accepted=True)
PRICE = Decimal("46.10")


def test_hours_begin_at_billed_from_and_every_hour_after() -> None:
    assert metering.hours_begun(START, START - timedelta(seconds=1), 3600) == 0
    assert metering.hours_begun(START, START, 3600) == 1
    assert metering.hours_begun(START, START + timedelta(seconds=3599.999), 3600) == 1
    assert metering.hours_begun(START, START + timedelta(seconds=3600), 3600) == 2
    assert metering.paid_until(START, 3, 60) == START + timedelta(seconds=180)


@pytest.mark.parametrize(
    ("unit", "minutes", "refund"),
    [
        # 50 minutes used of an hour paid at $46.10
        (VERDA, 50, "7.68"),  # 5 blocks of 10 min used: $38.42, one block back
        (HYPERSTACK, 50, "7.68"),  # 50 minutes used: $38.42
        (QUANTACLOUD, 50, "0.00"),  # the hour begun is the provider's charge
        (VERDA, 41, "7.68"),  # 41 minutes begin the fifth block
        (HYPERSTACK, 41, "14.60"),  # 41 minutes: $31.50
        (VERDA, 0, "46.10"),  # never billed: all of it back
        (QUANTACLOUD, 0, "46.10"),
    ],
)
def test_the_refund_is_what_was_paid_less_the_blocks_begun(
    unit: BillingUnit, minutes: int, refund: str
) -> None:
    back = metering.refund(
        PRICE, paid_hours=1, billed_seconds=minutes * 60, hour_seconds=3600, unit=unit
    )
    assert back == Decimal(refund)


def test_rules_scale_with_the_billing_hour() -> None:
    # A 60-second billing hour: Verda's block is 10 s; 25 s used is three blocks.
    back = metering.refund(
        Decimal("6.00"), paid_hours=1, billed_seconds=25, hour_seconds=60, unit=VERDA
    )
    assert back == Decimal("3.00")


def test_a_clock_difference_below_a_millisecond_begins_no_block() -> None:
    blocks = metering.used_blocks(600.0000001, 3600, VERDA)
    assert blocks == 1
    assert metering.used_blocks(600.002, 3600, VERDA) == 2  # positive control


def test_time_run_unpaid_is_never_charged() -> None:
    # Two hours paid, two hours and a grace run: nothing comes back, nothing more is taken.
    back = metering.refund(
        PRICE, paid_hours=2, billed_seconds=2 * 3600 + 600, hour_seconds=3600, unit=HYPERSTACK
    )
    assert back == Decimal(0)


def test_limits_end_the_machine_at_the_first_limit_reached() -> None:
    def ends(**limits: Decimal | None) -> tuple[datetime, str] | None:
        return metering.terminates_at(
            billed_from=START,
            hour_seconds=3600,
            price_per_hour=PRICE,
            max_runtime_hours=limits.get("runtime"),
            max_total=limits.get("total"),
        )

    assert ends() is None
    assert ends(runtime=Decimal("12")) == (START + timedelta(hours=12), "max_runtime")
    # $500 pays 10 whole hours at $46.10: the 11th would pass it.
    assert ends(total=Decimal("500")) == (START + timedelta(hours=10), "max_total")
    assert ends(runtime=Decimal("12"), total=Decimal("500"))[1] == "max_total"  # type: ignore[index]
    assert ends(runtime=Decimal("1.5"), total=Decimal("500")) == (
        START + timedelta(hours=1.5),
        "max_runtime",
    )


def test_limits_count_billed_hours_from_when_the_provider_starts_billing() -> None:
    def ends(billed_from: datetime | None) -> tuple[datetime, str] | None:
        return metering.terminates_at(
            billed_from=billed_from,
            hour_seconds=3600,
            price_per_hour=PRICE,
            max_runtime_hours=Decimal("1"),
            max_total=None,
        )

    # QuantaCloud bills from the accepted create: one billed hour ends one hour after it,
    # however long the machine then took to boot, so no second hour is paid.
    assert ends(START) == (START + timedelta(hours=1), "max_runtime")
    assert ends(None) is None  # not billing yet (a VM that has not run at Verda): no end


def test_the_runway_is_the_available_balance_over_the_hourly_spend() -> None:
    assert metering.runway_hours(Decimal("92.20"), PRICE) == Decimal("2.00")
    assert metering.runway_hours(Decimal("100"), PRICE) == Decimal("2.16")  # rounded down
    assert metering.runway_hours(Decimal("100"), Decimal(0)) is None


@given(
    price=st.decimals(min_value=Decimal("0.01"), max_value=Decimal("500"), places=2),
    paid_hours=st.integers(min_value=1, max_value=48),
    billed=st.floats(min_value=0, max_value=60 * 3600, allow_nan=False),
    hour=st.sampled_from([1.0, 2.0, 60.0, 3600.0]),
    unit=st.sampled_from([VERDA, HYPERSTACK, QUANTACLOUD]),
)
def test_a_refund_never_exceeds_what_was_paid_nor_charges_beyond_it(
    price: Decimal, paid_hours: int, billed: float, hour: float, unit: BillingUnit
) -> None:
    seconds = billed * hour / 3600  # the same share of the run, in this hour's length
    back = metering.refund(
        price, paid_hours=paid_hours, billed_seconds=seconds, hour_seconds=hour, unit=unit
    )
    paid = price * paid_hours
    assert Decimal(0) <= back <= paid
    assert back == back.quantize(Decimal("0.01"))
    # What is kept covers the blocks begun within what was paid, never less.
    used = metering.used_amount(price, seconds, hour, unit)
    assert paid - back == min(paid, used)
