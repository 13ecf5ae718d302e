"""Failures that are not the handlers' own still answer in the JSON error shape."""

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from app.settings import Settings
from tests.factories import create_account
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
