"""Failures that are not the handlers' own still answer in the JSON error shape."""

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from app.settings import Settings
from tests.factories import create_account, order_body
from tests.waiting import started


@pytest.fixture
async def one_connection_app(settings: Settings) -> AsyncIterator[FastAPI]:
    """The app with a pool of one connection that gives up waiting for it after 50 ms."""
    narrow = settings.model_copy(
        update={"db_pool_size": 1, "db_max_overflow": 0, "db_pool_timeout_seconds": 0.05}
    )
    application = create_app(narrow)
    async with started(application):
        yield application


async def test_no_free_database_connection_is_a_503_to_retry(one_connection_app: FastAPI) -> None:
    transport = httpx.ASGITransport(app=one_connection_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        account = await create_account(client)
        headers = account.headers
        async with one_connection_app.state.engine.connect() as held:
            await held.exec_driver_sql("SELECT 1")  # the pool's one connection, taken
            refused = await client.get("/v1/orders", headers=headers)
        served = await client.get("/v1/orders", headers=headers)  # positive control
    assert refused.status_code == 503
    assert refused.headers["Retry-After"] == "1"
    assert refused.json()["error"]["code"] == "overloaded"
    assert served.status_code == 200


async def test_a_huge_id_is_not_echoed(client: httpx.AsyncClient) -> None:
    account = await create_account(client)
    response = await client.get(f"/v1/orders/ord_{'a' * 60000}", headers=account.headers)
    assert response.status_code == 422  # longer than any id: it names nothing
    assert response.json()["error"]["details"] == [
        {"field": "order_id", "message": "String should have at most 40 characters"}
    ]
    assert len(response.content) < 200
    longest = await client.get(f"/v1/orders/ord_{'a' * 36}", headers=account.headers)
    assert longest.status_code == 404
    assert longest.json()["error"]["message"] == f"no order 'ord_{'a' * 36}'"
    short = await client.get("/v1/orders/ord_nothing", headers=account.headers)
    assert short.json()["error"]["message"] == "no order 'ord_nothing'"  # positive control


async def test_an_unknown_provider_is_quoted_short_and_escaped(client: httpx.AsyncClient) -> None:
    account = await create_account(client)
    name = "\u202e" + "x" * 500
    response = await client.get(
        "/v1/stock/summary", params={"providers": name}, headers=account.headers
    )
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "\u202e" not in response.text and "x" * 41 not in response.text
    assert f"unknown provider '\\u202e{'x' * 39}...'" in message
    ordered = await client.post(
        "/v1/orders", json=order_body(providers=["x" * 500]), headers=account.headers
    )
    assert ordered.status_code == 422 and "x" * 41 not in ordered.text


async def test_an_unknown_field_is_named_short(client: httpx.AsyncClient) -> None:
    account = await create_account(client)
    response = await client.post(
        "/v1/orders", json={**order_body(), "k" * 60000: 1}, headers=account.headers
    )
    assert response.status_code == 422
    assert [d["field"] for d in response.json()["error"]["details"]] == [f"'{'k' * 40}...'"]
    assert len(response.content) < 500
    typo = await client.post(
        "/v1/orders", json={**order_body(), "nmae": "x"}, headers=account.headers
    )
    assert [d["field"] for d in typo.json()["error"]["details"]] == ["nmae"]


async def test_no_redirect_reflects_the_host_header(client: httpx.AsyncClient) -> None:
    account = await create_account(client)
    response = await client.get("/v1/orders/", headers={**account.headers, "Host": "evil.example"})
    assert response.status_code == 404
    assert "location" not in response.headers
    assert response.json()["error"]["code"] == "not_found"
    listed = await client.get("/v1/orders", headers={**account.headers, "Host": "evil.example"})
    assert listed.status_code == 200  # the path without the slash answers as ever
