"""Accounts, credits, the caller's balance and ledger, and who may call what."""

from decimal import Decimal

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Provider
from app.providers.base import VM, Offer, VMState
from app.services import attempts
from app.storage.db import create_sessionmaker, session_scope
from tests.factories import ADMIN, claim, create_account, place_order


class TestCreateAccount:
    async def test_admin_creates_an_account_and_sees_its_key_once(
        self, client: httpx.AsyncClient
    ) -> None:
        response = await client.post(
            "/v1/accounts", json={"name": "  Ada Lovelace "}, headers=ADMIN
        )
        assert response.status_code == 201
        body = response.json()
        assert body["name"] == "Ada Lovelace"
        assert body["id"].startswith("acct_")
        assert body["api_key"].startswith("ap_live_")
        own = await client.get(
            "/v1/account", headers={"Authorization": f"Bearer {body['api_key']}"}
        )
        assert own.status_code == 200
        assert body["api_key"] not in own.text

    async def test_the_api_key_is_stored_only_as_a_hash(
        self, client: httpx.AsyncClient, engine: object
    ) -> None:
        from sqlalchemy import text
        from sqlalchemy.ext.asyncio import AsyncEngine

        assert isinstance(engine, AsyncEngine)
        account = await create_account(client)
        async with engine.connect() as connection:
            rows = (await connection.execute(text("SELECT * FROM accounts"))).all()
        assert rows and all(account.api_key not in str(tuple(row)) for row in rows)

    @pytest.mark.parametrize("body", [{}, {"name": ""}, {"name": "x" * 201}, {"name": 5}, []])
    async def test_a_bad_name_is_a_422(self, client: httpx.AsyncClient, body: object) -> None:
        response = await client.post("/v1/accounts", json=body, headers=ADMIN)
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "validation_error"


OFFER = Offer(Provider("hyperstack"), "CANADA-1", "n3-B300x8", "B300", 8, Decimal("40.00"))


async def _runs(engine: AsyncEngine, order_id: str) -> None:
    """The order's machine runs at $40 an hour, its first hour paid."""
    intent = await claim(engine, order_id, OFFER)
    vm = VM(Provider("hyperstack"), "412001", VMState.RUNNING, "ACTIVE", ip="203.0.113.9")
    async with session_scope(create_sessionmaker(engine)) as session:
        await attempts.settle_created(session, attempt_id=intent.attempt_id, vm=vm)
    async with session_scope(create_sessionmaker(engine)) as session:
        await attempts.settle_running(session, attempt_id=intent.attempt_id, vm=vm)


class TestAccountsList:
    async def test_the_admin_lists_accounts_with_money_and_machines(
        self, client: httpx.AsyncClient, engine: AsyncEngine
    ) -> None:
        idle = await create_account(client, credit="10")
        busy = await create_account(client, credit="100")
        placed = await place_order(client, busy)
        await _runs(engine, placed["id"])
        answer = await client.get("/v1/accounts", headers=ADMIN)
        assert answer.status_code == 200, answer.text
        shown = {a["id"]: a for a in answer.json()["data"]}
        assert (shown[busy.id]["machines"], shown[busy.id]["hourly_spend"]) == (1, "40.00")
        assert shown[busy.id]["available"] == "60.00"  # its first hour paid
        assert (shown[idle.id]["machines"], shown[idle.id]["balance"]) == (0, "10.00")
        assert [a["id"] for a in answer.json()["data"]][:2] == [busy.id, idle.id]  # newest first
        one = await client.get("/v1/accounts?limit=1", headers=ADMIN)
        later = await client.get(
            f"/v1/accounts?limit=1&cursor={one.json()['next_cursor']}", headers=ADMIN
        )
        assert [a["id"] for a in later.json()["data"]] == [idle.id]

    async def test_an_account_key_cannot_list_accounts(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        answer = await client.get("/v1/accounts", headers=account.headers)
        assert answer.status_code == 403
        orders = await client.get("/v1/admin/orders", headers=account.headers)
        assert orders.status_code == 403

    async def test_the_admin_lists_every_accounts_orders(
        self, client: httpx.AsyncClient, engine: AsyncEngine
    ) -> None:
        ada, bob = await create_account(client), await create_account(client, credit="100")
        first = await place_order(client, ada)
        second = await place_order(client, bob)
        await _runs(engine, second["id"])
        answer = await client.get("/v1/admin/orders", headers=ADMIN)
        assert answer.status_code == 200, answer.text
        shown = [(o["id"], o["account_id"], o["status"]) for o in answer.json()["data"]]
        assert shown[:2] == [(second["id"], bob.id, "running"), (first["id"], ada.id, "waiting")]
        assert answer.json()["data"][0]["deployment"]["provider"] == "hyperstack"
        waiting = await client.get("/v1/admin/orders?status=waiting", headers=ADMIN)
        assert [o["id"] for o in waiting.json()["data"]] == [first["id"]]


class TestCredits:
    async def test_a_credit_raises_the_balance_and_shows_in_the_ledger(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        response = await client.post(
            f"/v1/accounts/{account.id}/credits",
            json={"amount": "250.00", "note": "invoice 17"},
            headers=ADMIN,
        )
        assert response.status_code == 201
        entry = response.json()
        assert entry["kind"] == "topup"
        assert entry["amount"] == "250.00" and entry["balance_after"] == "250.00"
        assert entry["note"] == "invoice 17"
        balance = (await client.get("/v1/account", headers=account.headers)).json()
        assert (balance["balance"], balance["held"], balance["available"]) == (
            "250.00",
            "0.00",
            "250.00",
        )
        ledger = (await client.get("/v1/account/ledger", headers=account.headers)).json()
        assert [e["id"] for e in ledger["data"]] == [entry["id"]]

    async def test_a_retried_credit_with_its_idempotency_key_credits_once(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        headers = {**ADMIN, "Idempotency-Key": "topup-2026-11-29"}
        path = f"/v1/accounts/{account.id}/credits"
        first = await client.post(path, json={"amount": "50"}, headers=headers)
        again = await client.post(path, json={"amount": "50.00"}, headers=headers)
        assert first.status_code == again.status_code == 201
        assert again.json() == first.json()
        assert again.headers["idempotent-replayed"] == "true"
        balance = (await client.get("/v1/account", headers=account.headers)).json()
        assert balance["balance"] == "50.00"
        other = await client.post(path, json={"amount": "60"}, headers=headers)
        assert other.status_code == 422
        assert other.json()["error"]["code"] == "idempotency_key_reused"

    async def test_amounts_are_exact_decimal_strings(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        for amount in ("0.10", "0.20", 0.1):
            await client.post(
                f"/v1/accounts/{account.id}/credits", json={"amount": amount}, headers=ADMIN
            )
        balance = (await client.get("/v1/account", headers=account.headers)).json()
        assert balance["balance"] == "0.40"

    @pytest.mark.parametrize(
        "amount", ["-5", "0", "abc", "1.001", "1e9", "NaN", "Infinity", None, True, "10000000"]
    )
    async def test_a_bad_amount_is_a_422_and_changes_nothing(
        self, client: httpx.AsyncClient, amount: object
    ) -> None:
        account = await create_account(client)
        response = await client.post(
            f"/v1/accounts/{account.id}/credits", json={"amount": amount}, headers=ADMIN
        )
        assert response.status_code == 422, response.text
        balance = (await client.get("/v1/account", headers=account.headers)).json()
        assert balance["balance"] == "0.00"

    async def test_credit_to_a_missing_account_is_a_404(self, client: httpx.AsyncClient) -> None:
        response = await client.post(
            "/v1/accounts/acct_nope/credits", json={"amount": "5"}, headers=ADMIN
        )
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"


class TestLedger:
    async def test_the_ledger_pages_newest_first(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        for amount in range(1, 6):
            await client.post(
                f"/v1/accounts/{account.id}/credits", json={"amount": amount}, headers=ADMIN
            )
        first = (
            await client.get("/v1/account/ledger", params={"limit": 3}, headers=account.headers)
        ).json()
        assert [e["amount"] for e in first["data"]] == ["5.00", "4.00", "3.00"]
        second = (
            await client.get(
                "/v1/account/ledger",
                params={"limit": 3, "cursor": first["next_cursor"]},
                headers=account.headers,
            )
        ).json()
        assert [e["amount"] for e in second["data"]] == ["2.00", "1.00"]
        assert second["next_cursor"] is None

    async def test_an_account_sees_only_its_own_ledger(self, client: httpx.AsyncClient) -> None:
        ada = await create_account(client, "Ada", credit="10")
        bob = await create_account(client, "Bob", credit="20")
        entries = (await client.get("/v1/account/ledger", headers=bob.headers)).json()["data"]
        assert [e["amount"] for e in entries] == ["20.00"]
        ada_view = (await client.get("/v1/account", headers=ada.headers)).json()
        assert ada_view["balance"] == "10.00"


class TestAuth:
    @pytest.mark.parametrize("path", ["/v1/account", "/v1/account/ledger", "/v1/orders"])
    async def test_no_key_is_a_401(self, client: httpx.AsyncClient, path: str) -> None:
        response = await client.get(path)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"
        assert response.headers["www-authenticate"] == "Bearer"

    @pytest.mark.parametrize(
        "header", ["Bearer ap_live_unknown", "Basic dXNlcjpwYXNz", "Bearer", "ap_live_x"]
    )
    async def test_a_wrong_key_is_a_401(self, client: httpx.AsyncClient, header: str) -> None:
        response = await client.get("/v1/account", headers={"Authorization": header})
        assert response.status_code == 401

    async def test_an_account_key_on_admin_endpoints_is_a_403(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        response = await client.post("/v1/accounts", json={"name": "Eve"}, headers=account.headers)
        assert response.status_code == 403
        credit = await client.post(
            f"/v1/accounts/{account.id}/credits", json={"amount": "1000"}, headers=account.headers
        )
        assert credit.status_code == 403
        assert (await client.get("/v1/account", headers=account.headers)).json()[
            "balance"
        ] == "0.00"

    async def test_the_admin_key_has_no_account(self, client: httpx.AsyncClient) -> None:
        response = await client.get("/v1/account", headers=ADMIN)
        assert response.status_code == 403

    async def test_admin_endpoints_without_a_key_are_a_401(self, client: httpx.AsyncClient) -> None:
        response = await client.post("/v1/accounts", json={"name": "Eve"})
        assert response.status_code == 401

    async def test_orders_need_an_account_key(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        await place_order(client, account)
        response = await client.get("/v1/orders", headers=ADMIN)
        assert response.status_code == 403
