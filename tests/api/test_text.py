"""Text the databases cannot store, and control characters, are a 422 naming the field.

PostgreSQL refuses NUL in text (it used to be a 500 there while SQLite stored it), so every
case runs on both databases and checks that nothing was stored.
"""

from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.storage.models import Account
from tests.factories import ADMIN, AccountHandle, create_account, order_body, ssh_key

PUBLIC_URL = "https://203.0.114.9/hooks"
# NUL, BEL, ESC, DEL and the C1 "next line": none is stripped as surrounding whitespace.
CONTROL = ["\u0000", "\u0007", "\u001b", "\u007f", "\u0085"]
SINGLE_LINE_ONLY = ["\t", "\n", "\r\n"]  # fine in a note or a description


def refused(response: httpx.Response, field: str) -> None:
    """A 422 in the usual shape that names `field` and does not echo the input."""
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert [d["field"] for d in error["details"]] == [field]
    assert "control characters" in error["details"][0]["message"]
    assert "secret" not in response.text


async def orders_of(client: httpx.AsyncClient, account: AccountHandle) -> list[Any]:
    listed = await client.get("/v1/orders", headers=account.headers)
    data: list[Any] = listed.json()["data"]
    return data


class TestOrders:
    @pytest.mark.parametrize("char", CONTROL + SINGLE_LINE_ONLY)
    async def test_a_control_character_in_the_name_is_refused(
        self, client: httpx.AsyncClient, char: str
    ) -> None:
        account = await create_account(client)
        response = await client.post(
            "/v1/orders", json=order_body(name=f"secret{char}run"), headers=account.headers
        )
        refused(response, "name")
        assert await orders_of(client, account) == []
        fine = await client.post(
            "/v1/orders", json=order_body(name="run 7"), headers=account.headers
        )
        assert fine.status_code == 201, fine.text

    @pytest.mark.parametrize("char", ["\u0000", "\u001b"])
    async def test_a_control_character_in_the_key_comment_is_refused(
        self, client: httpx.AsyncClient, char: str
    ) -> None:
        account = await create_account(client)
        key = ssh_key("ssh-ed25519").replace("me@laptop", f"secret{char}me@laptop")
        response = await client.post(
            "/v1/orders", json=order_body(ssh_public_key=key), headers=account.headers
        )
        refused(response, "ssh_public_key")
        assert await orders_of(client, account) == []

    async def test_a_pasted_key_with_its_line_break_is_still_fine(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        key = ssh_key("ssh-ed25519")
        response = await client.post(
            "/v1/orders", json=order_body(ssh_public_key=f"{key}\n"), headers=account.headers
        )
        assert response.status_code == 201, response.text
        assert response.json()["ssh_public_key"] == key


class TestAccountsAndCredits:
    @pytest.mark.parametrize("char", CONTROL + SINGLE_LINE_ONLY)
    async def test_a_control_character_in_an_account_name_is_refused(
        self, client: httpx.AsyncClient, engine: AsyncEngine, char: str
    ) -> None:
        response = await client.post(
            "/v1/accounts", json={"name": f"secret{char}Ada"}, headers=ADMIN
        )
        refused(response, "name")
        async with engine.connect() as connection:
            count = (await connection.execute(select(func.count()).select_from(Account))).scalar()
        assert count == 0
        await create_account(client, "Ada Lovelace")  # the same request without it is fine

    @pytest.mark.parametrize("char", CONTROL)
    async def test_a_control_character_in_a_credit_note_is_refused(
        self, client: httpx.AsyncClient, char: str
    ) -> None:
        account = await create_account(client)
        response = await client.post(
            f"/v1/accounts/{account.id}/credits",
            json={"amount": "5", "note": f"secret{char}wire"},
            headers=ADMIN,
        )
        refused(response, "note")
        ledger = (await client.get("/v1/account/ledger", headers=account.headers)).json()
        assert ledger["data"] == []

    async def test_a_note_may_have_several_lines_and_tabs(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        note = "wire 42\r\nfrom:\tAda\nthanks"
        response = await client.post(
            f"/v1/accounts/{account.id}/credits", json={"amount": "5", "note": note}, headers=ADMIN
        )
        assert response.status_code == 201, response.text
        ledger = (await client.get("/v1/account/ledger", headers=account.headers)).json()
        assert [e["note"] for e in ledger["data"]] == [note]


class TestWebhookEndpoints:
    @pytest.mark.parametrize("char", CONTROL)
    async def test_a_control_character_in_a_description_is_refused(
        self, client: httpx.AsyncClient, char: str
    ) -> None:
        account = await create_account(client)
        created = await client.post(
            "/v1/webhook-endpoints",
            json={"url": PUBLIC_URL, "description": f"secret{char}pager"},
            headers=account.headers,
        )
        refused(created, "description")
        listed = await client.get("/v1/webhook-endpoints", headers=account.headers)
        assert listed.json()["data"] == []

    async def test_a_description_changed_to_one_with_nul_is_refused_and_kept(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        created = await client.post(
            "/v1/webhook-endpoints",
            json={"url": PUBLIC_URL, "description": "pager\n\tsecond line"},
            headers=account.headers,
        )
        assert created.status_code == 201, created.text
        path = f"/v1/webhook-endpoints/{created.json()['id']}"
        changed = await client.patch(
            path, json={"description": "secret\u0000"}, headers=account.headers
        )
        refused(changed, "description")
        shown = await client.get(path, headers=account.headers)
        assert shown.json()["description"] == "pager\n\tsecond line"

    @pytest.mark.parametrize("character", ["\u0000", "\u0085"])
    async def test_a_control_character_in_the_url_is_refused(
        self, client: httpx.AsyncClient, character: str
    ) -> None:
        account = await create_account(client)
        url = f"{PUBLIC_URL}/secret{character}x"
        created = await client.post(
            "/v1/webhook-endpoints", json={"url": url}, headers=account.headers
        )
        refused(created, "url")
        listed = await client.get("/v1/webhook-endpoints", headers=account.headers)
        assert listed.json()["data"] == []


class TestIdsInThePath:
    async def test_an_id_with_nul_is_a_422_and_a_well_formed_unknown_id_a_404(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        calls = [
            ("GET", "/v1/orders/{}", "order_id", account.headers),
            ("GET", "/v1/orders/{}/events", "order_id", account.headers),
            ("POST", "/v1/orders/{}/cancel", "order_id", account.headers),
            ("POST", "/v1/accounts/{}/credits", "account_id", ADMIN),
            ("GET", "/v1/webhook-endpoints/{}", "endpoint_id", account.headers),
            ("PATCH", "/v1/webhook-endpoints/{}", "endpoint_id", account.headers),
            ("DELETE", "/v1/webhook-endpoints/{}", "endpoint_id", account.headers),
            ("POST", "/v1/webhook-endpoints/{}/rotate-secret", "endpoint_id", account.headers),
            ("GET", "/v1/webhook-endpoints/{}/deliveries", "endpoint_id", account.headers),
            ("POST", "/v1/webhook-deliveries/{}/redeliver", "delivery_id", account.headers),
        ]
        for method, path, field, headers in calls:
            body = {"amount": "5"} if field == "account_id" else {}
            bad = await client.request(
                method, path.format("secret%00x"), json=body, headers=headers
            )
            refused(bad, field)
            unknown = await client.request(
                method, path.format("x_01jd3x0000000000000000000"), json=body, headers=headers
            )
            assert unknown.status_code == 404, (method, path, unknown.text)


class TestQueryParameters:
    async def test_nul_in_a_filter_or_cursor_is_a_422_naming_it(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        for path, field in [
            ("/v1/offers?gpu_model=secret%00", "gpu_model"),
            ("/v1/orders?cursor=ord_secret%00", "cursor"),
            ("/v1/orders?status=waiting%00", "status"),
            ("/v1/webhook-endpoints?cursor=whe_secret%00", "cursor"),
            ("/v1/account/ledger?cursor=led_secret%00", "cursor"),
        ]:
            response = await client.get(path, headers=account.headers)
            assert response.status_code == 422, (path, response.text)
            error = response.json()["error"]
            assert [d["field"] for d in error["details"]] == [field], path
            assert "secret" not in response.text, path
        known = await client.get("/v1/offers?gpu_model=h100", headers=account.headers)
        assert known.status_code == 200
