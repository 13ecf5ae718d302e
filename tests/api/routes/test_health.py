"""Liveness and readiness."""

import httpx
from fastapi import FastAPI

from app.storage.db import create_engine, create_read_sessionmaker


async def test_healthz_answers_while_the_process_is_up(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_answers_when_the_database_does(client: httpx.AsyncClient) -> None:
    response = await client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "dry_run": False}


async def test_readyz_is_503_when_the_database_is_unreachable(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    unreachable = create_engine("postgresql+asyncpg://nobody@127.0.0.1:9/none")
    app.state.read_sessionmaker = create_read_sessionmaker(unreachable)
    try:
        response = await client.get("/readyz")
    finally:
        await unreachable.dispose()
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "database_unavailable"


async def test_an_unexpected_failure_is_still_a_json_error(app: FastAPI) -> None:
    @app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("secret detail that must not leak")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        response = await client.get("/boom")
    assert response.status_code == 500
    assert response.json() == {
        "error": {"code": "internal_error", "message": "something went wrong on our side"}
    }
