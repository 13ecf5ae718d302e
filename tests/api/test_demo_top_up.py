"""`POST /v1/account/credits`: in demo mode an account tops up its own play money; in live mode
top-ups stay the operator's (`POST /v1/accounts/{id}/credits` with the admin key)."""

from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.factories import create_account


@pytest.fixture
def settings(settings: Settings, request: Any) -> Settings:
    """Demo mode, unless a test asks for another (`indirect`)."""
    return settings.model_copy(update={"mode": getattr(request, "param", "demo")})


@pytest.mark.parametrize("settings", ["demo", "live"], indirect=True)
async def test_a_demo_account_tops_itself_up_and_live_ones_cannot(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    account = await create_account(client, credit="5")
    answer = await client.post(
        "/v1/account/credits", json={"amount": "250"}, headers=account.headers
    )
    balance = (await client.get("/v1/account", headers=account.headers)).json()["balance"]
    if settings.mode == "demo":
        assert answer.status_code == 201, answer.text
        assert (answer.json()["kind"], answer.json()["amount"]) == ("topup", "250.00")
        assert balance == "255.00"
    else:
        assert answer.status_code == 403, answer.text
        error = answer.json()["error"]
        assert error["code"] == "demo_only" and "operator" in error["message"]
        assert balance == "5.00"


@pytest.mark.parametrize("amount", ["1000.01", "0", "-5", "2.345"])
async def test_a_demo_top_up_is_a_positive_amount_of_at_most_a_thousand(
    client: httpx.AsyncClient, amount: str
) -> None:
    account = await create_account(client, credit="5")
    answer = await client.post(
        "/v1/account/credits", json={"amount": amount}, headers=account.headers
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["details"][0]["field"] == "amount"
    balance = (await client.get("/v1/account", headers=account.headers)).json()["balance"]
    assert balance == "5.00"


async def test_a_retried_demo_top_up_with_its_idempotency_key_credits_once(
    client: httpx.AsyncClient,
) -> None:
    account = await create_account(client)
    headers = {**account.headers, "Idempotency-Key": "top-up-1"}
    for _ in range(2):
        answer = await client.post("/v1/account/credits", json={"amount": "100"}, headers=headers)
        assert answer.status_code == 201, answer.text
    balance = (await client.get("/v1/account", headers=account.headers)).json()["balance"]
    assert balance == "100.00"
