"""Amounts a client sends (an order's `max_price_per_hour`, a credit's `amount`) are read only
when written plainly: ASCII digits, at most one dot and two decimals, as a string or a number."""

import json
from typing import Any

import httpx
import pytest

from tests.factories import ADMIN, AccountHandle, create_account, order_body

NOT_PLAIN: list[Any] = [
    "1_0",
    " 10 ",
    "\u0661\u0660",  # Arabic-Indic digits for 10
    "1e2",
    "+10",
    "10.555",
    "10.",
    ".5",
    "1,5",
    "",
    True,
    10.555,
    1e300,
]
PLAIN: list[tuple[Any, str]] = [
    ("10", "10.00"),
    ("10.5", "10.50"),
    ("10.55", "10.55"),
    (10, "10.00"),
    (10.5, "10.50"),
    (10.55, "10.55"),
    (10.1, "10.10"),
    (0.29, "0.29"),
]


def refused(response: httpx.Response, field: str) -> None:
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert [d["field"] for d in error["details"]] == [field]


def order_json(price: str) -> str:
    """An order body with `price` written in as it is: NaN or 1e2, which `json=` never sends."""
    return json.dumps(order_body(max_price_per_hour="PRICE")).replace('"PRICE"', price)


async def raw_post(
    client: httpx.AsyncClient, path: str, body: str, headers: dict[str, str]
) -> httpx.Response:
    return await client.post(
        path, content=body.encode(), headers={**headers, "Content-Type": "application/json"}
    )


async def orders_of(client: httpx.AsyncClient, account: AccountHandle) -> list[Any]:
    data: list[Any] = (await client.get("/v1/orders", headers=account.headers)).json()["data"]
    return data


class TestMaxPricePerHour:
    @pytest.mark.parametrize("price", NOT_PLAIN)
    async def test_a_price_not_written_plainly_is_refused(
        self, client: httpx.AsyncClient, price: Any
    ) -> None:
        account = await create_account(client)
        response = await client.post(
            "/v1/orders", json=order_body(max_price_per_hour=price), headers=account.headers
        )
        refused(response, "max_price_per_hour")
        assert "ASCII digits" in response.json()["error"]["details"][0]["message"]
        assert await orders_of(client, account) == []

    async def test_plain_prices_are_kept_exactly_in_cents(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        for price, shown in PLAIN:
            response = await client.post(
                "/v1/orders", json=order_body(max_price_per_hour=price), headers=account.headers
            )
            assert response.status_code == 201, (price, response.text)
            assert response.json()["max_price_per_hour"] == shown, price

    @pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
    async def test_nan_and_infinity_literals_are_refused(
        self, client: httpx.AsyncClient, literal: str
    ) -> None:
        # Not JSON at all (Python's json reads them; the strict body reading does not).
        account = await create_account(client)
        response = await raw_post(client, "/v1/orders", order_json(literal), account.headers)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "invalid_json"
        assert await orders_of(client, account) == []

    async def test_a_json_number_is_read_by_its_value(self, client: httpx.AsyncClient) -> None:
        # The body's JSON parser turns numbers into floats before validation sees them, so a
        # number's spelling is lost: 1e2 is 100.0 and fine, like 100; "1e2" as a string is not.
        account = await create_account(client)
        response = await raw_post(client, "/v1/orders", order_json("1e2"), account.headers)
        assert response.status_code == 201, response.text
        assert response.json()["max_price_per_hour"] == "100.00"


class TestCreditAmount:
    @pytest.mark.parametrize("amount", NOT_PLAIN)
    async def test_an_amount_not_written_plainly_is_refused(
        self, client: httpx.AsyncClient, amount: Any
    ) -> None:
        account = await create_account(client)
        response = await client.post(
            f"/v1/accounts/{account.id}/credits", json={"amount": amount}, headers=ADMIN
        )
        refused(response, "amount")
        balance = (await client.get("/v1/account", headers=account.headers)).json()
        assert balance["balance"] == "0.00"
        ledger = (await client.get("/v1/account/ledger", headers=account.headers)).json()
        assert ledger["data"] == []

    async def test_plain_amounts_are_credited_exactly(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        for amount, shown in PLAIN:
            response = await client.post(
                f"/v1/accounts/{account.id}/credits", json={"amount": amount}, headers=ADMIN
            )
            assert response.status_code == 201, (amount, response.text)
            assert response.json()["amount"] == shown, amount
        balance = (await client.get("/v1/account", headers=account.headers)).json()
        assert balance["balance"] == "72.49"  # 10 + 10.5 + 10.55 + 10 + 10.5 + 10.55 + 10.1 + 0.29
