"""Fee arithmetic and how amounts are written out."""

from decimal import Decimal

from app.money import format_money, format_usd, price_with_fees, to_cents


def test_price_with_fees_adds_percent_then_flat_fee_and_rounds_to_cents() -> None:
    price = price_with_fees(
        Decimal("46.10"), fee_percent=Decimal("5"), fee_flat_per_hour=Decimal("0.10")
    )
    assert price == Decimal("48.51")  # 46.10 * 1.05 = 48.405 -> 48.41, + 0.10


def test_price_with_no_fees_is_the_provider_price() -> None:
    assert price_with_fees(
        Decimal("2.39"), fee_percent=Decimal(0), fee_flat_per_hour=Decimal(0)
    ) == Decimal("2.39")


def test_half_cents_round_up() -> None:
    assert to_cents(Decimal("0.005")) == Decimal("0.01")
    assert to_cents(Decimal("45.5")) == Decimal("45.50")


def test_format_money_keeps_two_decimals_and_sub_cent_precision_when_present() -> None:
    assert format_money(Decimal("100")) == "100.00"
    assert format_money(Decimal("2.5095")) == "2.5095"
    assert format_usd(Decimal("46.1")) == "$46.10"
