"""Request bodies are read strictly: UTF-8 JSON, sent as JSON, one value per key, right types.

Every case that could write runs on both databases and checks that nothing was stored; each
has a valid body beside it that is still accepted.
"""

from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute

from app.api.strict_json import StrictJsonRoute
from app.main import create_app
from app.settings import Settings
from tests.factories import ADMIN, AccountHandle, create_account

PUBLIC_URL = "https://203.0.114.9/hooks"
ORDER = '{"gpu_model": "H100", "gpu_count": 1, "providers": ["verda"], "max_price_per_hour": 3}'
JSON = {"content-type": "application/json"}


async def orders_of(client: httpx.AsyncClient, account: AccountHandle) -> list[Any]:
    listed = await client.get("/v1/orders", headers=account.headers)
    data: list[Any] = listed.json()["data"]
    return data


def invalid_json(response: httpx.Response) -> None:
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_json"


def test_every_route_with_a_body_reads_it_strictly(settings: Settings) -> None:
    included = [getattr(r, "original_router", None) for r in create_app(settings).routes]
    routes = [r for router in included if router is not None for r in router.routes]
    with_body = [r for r in routes if isinstance(r, APIRoute) and r.body_field is not None]
    assert len(with_body) >= 6  # orders, limits, accounts, credits, webhooks (create, patch)
    assert [r.path for r in with_body if not isinstance(r, StrictJsonRoute)] == []


class TestMalformedBodies:
    async def test_a_duplicate_key_is_refused_not_last_wins(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        body = ORDER.replace(
            '"max_price_per_hour": 3', '"max_price_per_hour": -5, "max_price_per_hour": 3'
        )
        response = await client.post(
            "/v1/orders", content=body, headers={**account.headers, **JSON}
        )
        invalid_json(response)
        assert "'max_price_per_hour' appears twice" in response.json()["error"]["message"]
        assert await orders_of(client, account) == []
        fine = await client.post("/v1/orders", content=ORDER, headers={**account.headers, **JSON})
        assert fine.status_code == 201, fine.text

    async def test_a_duplicate_key_deep_inside_is_refused_too(
        self, client: httpx.AsyncClient
    ) -> None:
        response = await client.post(
            "/v1/accounts", content='{"name": "a", "name": "b"}', headers={**ADMIN, **JSON}
        )
        invalid_json(response)

    @pytest.mark.parametrize(
        "body",
        [
            b"{",
            b"[1",
            b"\xff\xfe",
            b"\xef\xbb\xbf" + ORDER.encode(),  # a UTF-8 byte order mark
            ORDER.encode("utf-16"),
            ORDER.encode("utf-32"),
            ORDER.replace("3}", "3" * 5000 + "}").encode(),  # past int()'s digit limit
            ORDER.replace("3}", "NaN}").encode(),
            b"[" * 100_00 + b"]" * 100_00,
            b"   ",
        ],
        ids=[
            "open",
            "list",
            "bad-utf8",
            "bom",
            "utf16",
            "utf32",
            "long-int",
            "nan",
            "deep",
            "blank",
        ],
    )
    async def test_every_malformed_body_is_the_same_422(
        self, client: httpx.AsyncClient, body: bytes
    ) -> None:
        account = await create_account(client)
        response = await client.post(
            "/v1/orders", content=body, headers={**account.headers, **JSON}
        )
        invalid_json(response)
        assert await orders_of(client, account) == []

    async def test_an_empty_body_is_the_same_422(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        response = await client.post("/v1/orders", headers=account.headers)
        invalid_json(response)


class TestContentType:
    @pytest.mark.parametrize(
        "content_type",
        [
            None,
            "text/plain",
            "application/x-www-form-urlencoded",
            "application/json; charset=utf-16",
        ],
    )
    async def test_a_body_not_sent_as_json_is_a_415(
        self, client: httpx.AsyncClient, content_type: str | None
    ) -> None:
        account = await create_account(client)
        headers = dict(account.headers)
        if content_type is not None:
            headers["content-type"] = content_type
        response = await client.post("/v1/orders", content=ORDER, headers=headers)
        assert response.status_code == 415, response.text
        assert response.json()["error"]["code"] == "unsupported_media_type"
        assert await orders_of(client, account) == []

    @pytest.mark.parametrize(
        "content_type",
        ["application/json", "application/json; charset=UTF-8", "application/merge-patch+json"],
    )
    async def test_json_types_are_accepted(
        self, client: httpx.AsyncClient, content_type: str
    ) -> None:
        account = await create_account(client)
        headers = {**account.headers, "content-type": content_type}
        response = await client.post("/v1/orders", content=ORDER, headers=headers)
        assert response.status_code == 201, response.text


class TestWebhookPatch:
    async def endpoint(self, client: httpx.AsyncClient) -> tuple[AccountHandle, str]:
        account = await create_account(client)
        made = await client.post(
            "/v1/webhook-endpoints", json={"url": PUBLIC_URL}, headers=account.headers
        )
        assert made.status_code == 201, made.text
        return account, str(made.json()["id"])

    @pytest.mark.parametrize(
        "change",
        [
            {"enabled": "yes"},
            {"enabled": 1},
            {"enabled": "false"},
            {"enabled": None},
            {"url": None},
            {"format": None},
        ],
    )
    async def test_a_wrong_type_or_a_null_that_cannot_be_stored_is_a_422(
        self, client: httpx.AsyncClient, change: dict[str, Any]
    ) -> None:
        account, endpoint_id = await self.endpoint(client)
        off = await client.patch(
            f"/v1/webhook-endpoints/{endpoint_id}", json={"enabled": False}, headers=account.headers
        )
        assert off.status_code == 200 and off.json()["enabled"] is False  # positive control
        response = await client.patch(
            f"/v1/webhook-endpoints/{endpoint_id}", json=change, headers=account.headers
        )
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "validation_error"
        assert [d["field"] for d in error["details"]] == list(change)
        after = await client.get(f"/v1/webhook-endpoints/{endpoint_id}", headers=account.headers)
        assert after.json()["enabled"] is False and after.json()["url"] == PUBLIC_URL

    async def test_a_null_description_still_clears_it(self, client: httpx.AsyncClient) -> None:
        account, endpoint_id = await self.endpoint(client)
        path = f"/v1/webhook-endpoints/{endpoint_id}"
        await client.patch(path, json={"description": "ops"}, headers=account.headers)
        cleared = await client.patch(path, json={"description": None}, headers=account.headers)
        assert cleared.status_code == 200, cleared.text
        assert cleared.json()["description"] is None


class TestInvisibleText:
    @pytest.mark.parametrize("text", ["\ufeff", "\u202egnp.exe", "run\u2066 7", "\u3164"])
    async def test_names_and_notes_refuse_invisible_or_bidi_text(
        self, client: httpx.AsyncClient, text: str
    ) -> None:
        account = await create_account(client)
        hooks = "/v1/webhook-endpoints"
        cases = [
            ("/v1/orders", {**_order(), "name": text}, account.headers, "name"),
            ("/v1/accounts", {"name": text}, ADMIN, "name"),
            (
                f"/v1/accounts/{account.id}/credits",
                {"amount": "5", "note": text},
                ADMIN,
                "note",
            ),
            (hooks, {"url": PUBLIC_URL, "description": text}, account.headers, "description"),
        ]
        for path, body, headers, field in cases:
            response = await client.post(path, json=body, headers=headers)
            assert response.status_code == 422, (path, response.text)
            assert [d["field"] for d in response.json()["error"]["details"]] == [field]
        assert await orders_of(client, account) == []
        balance = await client.get("/v1/account", headers=account.headers)
        assert balance.json()["balance"] == "0.00"
        listed = await client.get(hooks, headers=account.headers)
        assert listed.json()["data"] == []

    async def test_visible_text_with_accents_and_emoji_is_fine(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client, name="Zoë 東京 🚀")
        response = await client.post(
            "/v1/orders", json={**_order(), "name": "run\u00a07 ✓"}, headers=account.headers
        )
        assert response.status_code == 201, response.text


def _order() -> dict[str, Any]:
    return {"gpu_model": "H100", "gpu_count": 1, "providers": ["verda"], "max_price_per_hour": 3}
