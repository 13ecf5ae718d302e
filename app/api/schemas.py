"""Request and response bodies of the REST API shared by its resources (money, pages), and
those of accounts and their ledger; orders' are in `order_schemas`."""

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Generic, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
    computed_field,
)

from app.core import metering
from app.core.money import MONEY_PATTERN, parse_hours, parse_money, to_cents
from app.core.text import MultiLine, OneLine
from app.services.order_payload import MoneyOut

MAX_PRICE_PER_HOUR = Decimal("10000")
MAX_CREDIT = Decimal("1000000")
MAX_RUNTIME_HOURS = Decimal("87600")  # ten years


def _money_schema(maximum: Decimal) -> WithJsonSchema:
    return WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": MONEY_PATTERN},
                {"type": "number", "exclusiveMinimum": 0, "maximum": int(maximum)},
            ],
            "description": 'USD, more than 0, with at most two decimals: "46.50" or 46.5.',
        }
    )


# Amounts in cents; quantized so that "45.5", 45.5 and "45.50" are the same request.
PriceIn = Annotated[
    Decimal,
    BeforeValidator(parse_money),
    Field(gt=0, le=MAX_PRICE_PER_HOUR),
    AfterValidator(to_cents),
    _money_schema(MAX_PRICE_PER_HOUR),
]
CreditIn = Annotated[
    Decimal,
    BeforeValidator(parse_money),
    Field(gt=0, le=MAX_CREDIT),
    AfterValidator(to_cents),
    _money_schema(MAX_CREDIT),
]
TotalIn = Annotated[
    Decimal,
    BeforeValidator(parse_money),
    Field(gt=0, le=MAX_CREDIT),
    AfterValidator(to_cents),
    _money_schema(MAX_CREDIT),
]
HoursIn = Annotated[
    Decimal,
    BeforeValidator(parse_hours),
    Field(gt=0, le=MAX_RUNTIME_HOURS),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": MONEY_PATTERN},
                {"type": "number", "exclusiveMinimum": 0, "maximum": int(MAX_RUNTIME_HOURS)},
            ],
            "description": "Hours (billed), more than 0, with at most two decimals: 12 or 0.5.",
        }
    ),
]
Region = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64, pattern=r"^[\w.-]+$")
]
ShortText = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100), OneLine
]
Note = Annotated[str, StringConstraints(strip_whitespace=True, max_length=500), MultiLine]
T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a newest-first list; pass `next_cursor` as `cursor` for the next page."""

    data: list[T]
    next_cursor: str | None


class AccountCreate(BaseModel):
    """Body of `POST /v1/accounts`."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200), OneLine
    ]


class AccountCreated(BaseModel):
    """A new account, with its API key: the only time the key is shown."""

    id: str
    name: str
    api_key: str
    created_at: datetime


class AccountOut(BaseModel):
    """An account's balance: `available` is what is not held for creates in flight."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    balance: MoneyOut
    held: MoneyOut
    created_at: datetime

    # What its machines (accepted, not ended) cost an hour together, and how many (billed)
    # hours the available balance pays them (null: none runs); `low_balance` while that is
    # below AUTOPROVISION_LOW_BALANCE_HOURS.
    hourly_spend: MoneyOut = Decimal(0)
    low_balance: bool = False
    # How long a billed hour lasts here (3600 s; demo mode's are a minute): `runway_seconds`
    # is the runway on the clock.
    billing_hour_seconds: float = 3600.0
    # Whether the account may add play money itself (`POST /v1/account/credits`): demo mode.
    can_top_up: bool = False

    @computed_field  # type: ignore[prop-decorator]
    @property
    def available(self) -> MoneyOut:
        """Balance minus open holds."""
        return self.balance - self.held

    @computed_field  # type: ignore[prop-decorator]
    @property
    def runway_hours(self) -> float | None:
        """Available balance / hourly spend, in billed hours (null while nothing runs)."""
        runway = metering.runway_hours(self.balance - self.held, self.hourly_spend)
        return None if runway is None else float(runway)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def runway_seconds(self) -> int | None:
        """The runway on the clock: its billed hours times how long one lasts here."""
        hours = self.runway_hours
        return None if hours is None else int(hours * self.billing_hour_seconds)

    @classmethod
    def present(
        cls,
        account: Any,
        *,
        hourly_spend: Decimal,
        low_balance_hours: float,
        billing_hour_seconds: float = 3600.0,
        can_top_up: bool = False,
    ) -> "AccountOut":
        """The account with what its machines cost an hour, and whether that is running low."""
        out = cls.model_validate(account)
        out.hourly_spend = hourly_spend
        out.billing_hour_seconds = billing_hour_seconds
        out.can_top_up = can_top_up
        out.low_balance = metering.is_low_balance(
            out.balance - out.held, hourly_spend, low_balance_hours
        )
        return out


class AdminAccountOut(AccountOut):
    """An account as the admin sees it: its money, and how many machines it has running."""

    machines: int = 0  # accepted and not ended (deployed or running)


class CreditCreate(BaseModel):
    """Body of `POST /v1/accounts/{id}/credits`: a top-up in USD."""

    model_config = ConfigDict(extra="forbid")

    amount: CreditIn
    note: Note | None = None


class LedgerEntryOut(BaseModel):
    """One movement on an account's ledger, with the balance it left behind."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    kind: str
    amount: MoneyOut
    balance_after: MoneyOut
    held_after: MoneyOut
    order_id: str | None
    hold_id: str | None
    note: str | None
    created_at: datetime

    @computed_field  # type: ignore[prop-decorator]
    @property
    def available_after(self) -> MoneyOut:
        """Available balance right after this entry."""
        return self.balance_after - self.held_after
