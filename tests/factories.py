"""Helpers that create things through the public API, as a client would, and (for tests of
the layers below it) through the services."""

import base64
from datetime import datetime
from decimal import ROUND_UP, Decimal
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.order_schemas import OrderCreate
from app.core.catalogue import Provider
from app.core.ids import new_id
from app.core.market import Fees, StockForecast
from app.core.money import CENT
from app.core.states import OrderStatus
from app.providers.base import VM, Offer, VMState
from app.services import accounts, attempts, claims, ledger, placing
from app.services.claims import Intent
from app.services.stock import days as stock_days
from app.services.stock import forecasts as stock_forecasts
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Order, StockCoverage, StockInterval
from app.support.secrets import SecretBox
from tests.fixtures.settings import ADMIN_KEY, SECRET_KEY

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


# An offer for the tests of the layers below the API: 1x L40S at Hyperstack, $1.10 an hour.
HYPER_L40S = Offer(Provider("hyperstack"), "CANADA-1", "n3-L40Sx1", "L40S", 1, Decimal("1.10"))
# The same at QuantaCloud, whose VMs have no name: its creates of one kind go one at a time.
QUANTA_L40S = Offer(Provider("quantacloud"), "us-east-1", "l40s-x1", "L40S", 1, Decimal("1.10"))


class AccountHandle:
    """An account created through the API: its id and ready-made auth headers."""

    def __init__(self, account_id: str, api_key: str) -> None:
        self.id = account_id
        self.api_key = api_key
        self.headers = {"Authorization": f"Bearer {api_key}"}


async def create_account(
    client: httpx.AsyncClient, name: str = "Ada", credit: Decimal | str | None = None
) -> AccountHandle:
    """A new account, optionally topped up."""
    response = await client.post("/v1/accounts", json={"name": name}, headers=ADMIN)
    assert response.status_code == 201, response.text
    body = response.json()
    account = AccountHandle(body["id"], body["api_key"])
    if credit is not None:
        topped = await client.post(
            f"/v1/accounts/{account.id}/credits", json={"amount": str(credit)}, headers=ADMIN
        )
        assert topped.status_code == 201, topped.text
    return account


def ssh_key(key_type: str, payload: bytes = b"\x00" * 32) -> str:
    """An OpenSSH public key line of `key_type` around `payload` (not a real key's)."""
    blob = len(key_type).to_bytes(4, "big") + key_type.encode() + payload
    return f"{key_type} {base64.b64encode(blob).decode()} me@laptop"


def order_body(**overrides: Any) -> dict[str, Any]:
    """A valid order request for 8x B300, with fields replaced by `overrides`."""
    body: dict[str, Any] = {
        "gpu_model": "B300",
        "gpu_count": 8,
        "providers": ["verda", "hyperstack"],
        "max_price_per_hour": "45.00",
    }
    body.update(overrides)
    return body


async def place_order(
    client: httpx.AsyncClient, account: AccountHandle, **overrides: Any
) -> dict[str, Any]:
    """Place an order and return its JSON."""
    response = await client.post(
        "/v1/orders", json=order_body(**overrides), headers=account.headers
    )
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


async def account_in_database(engine: AsyncEngine, name: str = "Ada") -> str:
    """A new account, made through the service layer; its id."""
    async with session_scope(create_sessionmaker(engine)) as session:
        account, _key = await accounts.create_account(session, name=name)
        return account.id


async def place_in_database(engine: AsyncEngine, account_id: str) -> str:
    """Place a 1x H100 order on Hyperstack through the service layer (no API); its id."""
    request = OrderCreate(
        gpu_model="H100", gpu_count=1, providers=["hyperstack"], max_price_per_hour="3.00"
    )
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await placing.place_order(
            session,
            account_id=account_id,
            request=request.new_order(),
            enabled={"hyperstack"},
            max_waiting=100,
        )
        return order.id


async def order_status(engine: AsyncEngine, order_id: str) -> OrderStatus:
    """An order's status as stored."""
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await session.get(Order, order_id)
        assert order is not None
        return order.status


async def force_order_status(engine: AsyncEngine, order_id: str, status: OrderStatus) -> None:
    """Move an order to `status` behind the API's back (for states the API cannot reach yet)."""
    async with session_scope(create_sessionmaker(engine)) as session:
        order = await session.get(Order, order_id)
        assert order is not None
        order.status = status


async def waiting_orders(
    engine: AsyncEngine,
    offer: Offer,
    count: int = 1,
    *,
    credit: int = 100,
    startup_script: str | None = None,
) -> list[str]:
    """`count` orders for `offer`'s machine that accept only its provider and price, placed
    through the service layer by one new account with `credit` dollars (each with the start-up
    script, if one is given, sealed with the test secret key)."""
    request = OrderCreate.model_validate(
        {"gpu_model": offer.gpu_model, "gpu_count": offer.gpu_count,
         "providers": [str(offer.provider)],
         "max_price_per_hour": offer.price_per_hour.quantize(CENT, rounding=ROUND_UP),
         "startup_script": startup_script}
    ).new_order()  # fmt: skip
    async with session_scope(create_sessionmaker(engine)) as session:
        account, _key = await accounts.create_account(session, name="service layer")
        await ledger.credit(session, account_id=account.id, amount=Decimal(credit))
        return [
            (
                await placing.place_order(
                    session,
                    account_id=account.id,
                    request=request,
                    enabled={offer.provider},
                    max_waiting=count,
                    box=SecretBox([SECRET_KEY]),
                )
            ).id
            for _ in range(count)
        ]


async def claim(engine: AsyncEngine, order_id: str, offer: Offer) -> Intent:
    """Claim a waiting order for `offer` at its price, committed, as a deploy pass does."""
    async with session_scope(create_sessionmaker(engine)) as session:
        intent = await claims.claim(
            session, order_id=order_id, offer=offer, price_with_fees=offer.price_per_hour
        )
    assert intent is not None
    return intent


async def claimed(engine: AsyncEngine, *offers: Offer) -> list[Intent]:
    """For each offer, an order of its own, claimed for it."""
    return [await claim(engine, (await waiting_orders(engine, o))[0], o) for o in offers]


async def running_machine(engine: AsyncEngine, offer: Offer) -> Intent:
    """An order of its own claimed for `offer`, its VM accepted and running now (the account
    paid its first hour)."""
    (intent,) = await claimed(engine, offer)
    vm = VM(offer.provider, "412001", VMState.RUNNING, "ACTIVE", ip="203.0.113.9")
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        await attempts.settle_created(session, attempt_id=intent.attempt_id, vm=vm)
    async with session_scope(maker) as session:
        await attempts.settle_running(session, attempt_id=intent.attempt_id, vm=vm)
    return intent


# Test fees (tests/fixtures/settings.py): 5 % + $0.10/h.
TEST_FEES = Fees(percent=Decimal(5), flat_per_hour=Decimal("0.10"))


def stock_interval(
    key: tuple[str, str, str],
    start: datetime,
    end: datetime | None,
    price: str,
    *,
    machine: tuple[str, int, str | None, int | None] = ("B300", 8, "sxm", 500),
    last_seen: datetime | None = None,
    nodes: int = 1,
    cluster_interconnect: str | None = None,
) -> StockInterval:
    """A history row: `key` (provider, region, sku) in stock from `start`, gone at `end` (None:
    still in stock), at the provider's `price`, seen with the test fees; `machine` is the GPU
    model, count per node, interconnect and disk, of each of its `nodes`."""
    provider, region, sku = key
    gpu_model, gpu_count, interconnect, disk_gb = machine
    return StockInterval(
        id=new_id("sti"),
        provider=provider,
        region=region,
        sku=sku,
        gpu_model=gpu_model,
        gpu_count=gpu_count,
        nodes=nodes,
        interconnect=interconnect,
        cluster_interconnect=cluster_interconnect,
        disk_gb=disk_gb,
        disk_fixed=False,
        price_per_hour=Decimal(price),
        fee_percent=TEST_FEES.percent,
        fee_flat_per_hour=TEST_FEES.flat_per_hour,
        price_per_hour_with_fees=TEST_FEES.apply(Decimal(price)),
        first_seen_at=start,
        last_seen_at=last_seen or end or start,
        gone_at=end,
        max_available=1,
        generated=False,
    )


def coverage_window(
    provider: str, start: datetime, last_read: datetime, *, ended: bool = False
) -> StockCoverage:
    """A history row: `provider`'s stock was read from `start` to `last_read` (open unless
    `ended`, then it ended at its last read)."""
    return StockCoverage(
        id=new_id("cov"),
        provider=provider,
        period_seconds=1.0,
        started_at=start,
        last_read_at=last_read,
        ended_at=last_read if ended else None,
        generated=False,
    )


async def record_history(
    engine: AsyncEngine, *rows: StockInterval | StockCoverage, generated: bool = False
) -> None:
    """Write history rows as the recorder leaves them (`generated`: as `demo-history` does):
    each closed interval in its days too."""
    for row in rows:
        row.generated = generated
    async with session_scope(create_sessionmaker(engine)) as session:
        session.add_all(rows)
        closed = [r for r in rows if isinstance(r, StockInterval) and r.gone_at is not None]
        await stock_days.add_closed(session, closed, generated=generated)


async def record_forecasts(
    engine: AsyncEngine, provider: str, *said: StockForecast, read_at: datetime
) -> None:
    """Store what `provider`'s read at `read_at` said it plans to have, as the recorder does."""
    async with session_scope(create_sessionmaker(engine)) as session:
        await stock_forecasts.record(session, provider, said, read_at=read_at)
