"""Money in USD as Decimal: fee arithmetic and the one way amounts are written out."""

from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")
MICRO = Decimal("0.000001")


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
