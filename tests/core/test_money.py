"""Reading amounts in, fee arithmetic, and how amounts are written out."""

from decimal import Decimal

import pytest

from app.core.money import format_money, format_usd, parse_money, price_with_fees, to_cents


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


def test_amounts_are_read_exactly_as_written() -> None:
    for value, expected in [
        ("46.50", "46.50"),
        ("46.5", "46.5"),
        ("46", "46"),
        ("0.01", "0.01"),
        (46, "46"),
        (46.5, "46.5"),
        (10.1, "10.1"),  # the decimal the client wrote, not the nearest binary float
        (0.29, "0.29"),
        (Decimal("46.50"), "46.50"),
    ]:
        parsed = parse_money(value)
        assert isinstance(parsed, Decimal) and parsed.as_tuple() == Decimal(expected).as_tuple()


@pytest.mark.parametrize(
    "value",
    [
        "1_0",
        " 10 ",
        "10 ",
        "\u0661\u0660",  # Arabic-Indic 10
        "\uff11\uff10",  # full-width 10
        "1e2",
        "1E2",
        "+10",
        "-10",
        "10.555",
        "10.",
        ".5",
        "1,5",
        "10.5.5",
        "0x10",
        "010",
        "",
        "NaN",
        "Infinity",
        True,
        False,
        None,
        10.555,
        -1,
        -0.5,
        1e22,  # a float whose shortest form has an exponent
        float("nan"),
        float("inf"),
        Decimal("1E+2"),
        [10],
    ],
)
def test_anything_else_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match="ASCII digits"):
        parse_money(value)
