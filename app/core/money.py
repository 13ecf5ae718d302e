"""Money in USD as Decimal: the one way amounts are read in, fee arithmetic, and the one way
they are written out."""

import re
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")
MICRO = Decimal("0.000001")
# The JSON number grammar without sign, exponent or more than two decimals, in ASCII digits only.
MONEY_PATTERN = r"^(0|[1-9][0-9]*)(\.[0-9]{1,2})?$"
_MONEY = re.compile(MONEY_PATTERN)
MONEY_FORMAT = (
    'must be an amount like "46.50" or 46.5: ASCII digits, at most one dot and two decimals, '
    "no sign, exponent, spaces or underscores"
)


def parse_money(value: object) -> Decimal:
    """An amount from a request, exactly as written: `"46.50"`, `46.5` or `46` (ValueError else)."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, float):
        # JSON numbers arrive as floats: read their shortest decimal form, which is what was
        # written (10.1 is "10.1"), never the binary value (10.0999999999999996447...).
        text = repr(value)
    elif isinstance(value, int | Decimal) and not isinstance(value, bool):
        text = str(value)
    else:
        raise ValueError(MONEY_FORMAT)
    if not _MONEY.fullmatch(text):
        raise ValueError(MONEY_FORMAT)
    return Decimal(text)


def parse_hours(value: object) -> Decimal:
    """A number of hours from a request, like an amount: `12`, `0.5` or `"1.25"`."""
    try:
        return parse_money(value)
    except ValueError:
        raise ValueError(
            "hours must be a number with at most two decimals, e.g. 12 or 0.5"
        ) from None


def price_with_fees(price: Decimal, *, fee_percent: Decimal, fee_flat_per_hour: Decimal) -> Decimal:
    """The hourly price a user pays for a machine the provider sells at `price`, in cents."""
    gross = price * (1 + fee_percent / 100) + fee_flat_per_hour
    return gross.quantize(CENT, rounding=ROUND_HALF_UP)


def to_cents(amount: Decimal) -> Decimal:
    """An amount with exactly two decimals (rounding half up)."""
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def format_money(amount: Decimal) -> str:
    """An amount as a JSON string: at least two decimals, more only when they carry value."""
    if amount == amount.quantize(CENT):
        return str(amount.quantize(CENT))
    return str(amount.quantize(MICRO).normalize())


def format_usd(amount: Decimal) -> str:
    """An amount for a sentence a person reads, e.g. `$46.10`."""
    return f"${format_money(amount)}"
