"""Property-based fuzzing of every endpoint from the OpenAPI schema: never a 500, always JSON.

schemathesis generates valid and invalid requests for each operation and sends them to a real
server (uvicorn in a thread, on an SQLite file); every answer must be a non-5xx with a JSON body,
every error must carry the service's error shape, and no error may repeat a generated string
longer than the service quotes (`app.core.text.QUOTE_LIMIT`).
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import Case, CheckContext, GenerationMode, Response
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok

from app.core.text import QUOTE_LIMIT
from app.main import create_app
from app.settings import Settings
from tests.fixtures.settings import ADMIN_KEY, SECRET_KEY
from tests.servers import serve_in_thread


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A live server on a fresh SQLite file, with one account that has placed an order."""
    db = Path(tmp_path_factory.mktemp("fuzz")) / "fuzz.db"
    app = create_app(
        Settings(
            _env_file=None,
            database_url=f"sqlite+aiosqlite:///{db}",
            admin_api_key=ADMIN_KEY,
            secret_key=SECRET_KEY,
            watcher=False,
        )
    )
    with serve_in_thread(app, lifespan="on") as base_url:
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        account = httpx.post(f"{base_url}/v1/accounts", json={"name": "fuzz"}, headers=admin).json()
        user = {"Authorization": f"Bearer {account['api_key']}"}
        httpx.post(
            f"{base_url}/v1/orders",
            json={
                "gpu_model": "H100",
                "gpu_count": 1,
                "providers": ["verda"],
                "max_price_per_hour": 3,
            },
            headers=user,
        )
        yield {"base_url": base_url, "schema": app.openapi(), "admin": admin, "user": user}


def _cases() -> list[Any]:
    """(operation, mode) pairs; only operations that take input can be sent invalid input."""
    app = create_app(Settings(_env_file=None, admin_api_key=ADMIN_KEY, secret_key=SECRET_KEY))
    schema = schemathesis.openapi.from_dict(app.openapi())
    pairs = []
    for result in schema.get_all_operations():
        if not isinstance(result, Ok):
            raise result.err()  # our own schema is invalid: that is a failure, not a skip
        operation = result.ok()
        if operation.path == "/v1/events/stream":
            continue  # never ends by design: tests/api/test_events.py covers it
        takes_input = {"parameters", "requestBody"} & set(operation.definition.raw)
        for mode in GenerationMode:
            if mode is GenerationMode.POSITIVE or takes_input:
                label = f"{operation.method.upper()} {operation.path} {mode.value}"
                pairs.append(pytest.param(operation, mode, id=label))
    return pairs


def _strings(value: Any) -> Iterator[str]:
    """Every string in a generated value: itself, its keys and items, deeply."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


@schemathesis.check
def no_echoed_input(_ctx: CheckContext, response: Response, case: Case[Any]) -> bool | None:
    """An error answer holds no generated string longer than the quote limit, as sent or as
    JSON escapes it."""
    if response.status_code < 400:
        return None
    sent = [case.path_parameters, case.query, case.headers, case.cookies, case.body]
    for text in _strings(sent):
        if len(text) > QUOTE_LIMIT:
            escaped = json.dumps(text)[1:-1]
            assert text not in response.text and escaped not in response.text, (
                f"{response.status_code} echoes {len(text)} characters of input"
            )
    return None


# schemathesis' own pytest plugin does not load under pytest 9, so each operation gets a
# plain hypothesis test over the strategy schemathesis builds for it.
@pytest.mark.parametrize(("operation", "mode"), _cases())
def test_no_request_makes_the_service_fail(
    operation: Any, mode: GenerationMode, server: dict[str, Any]
) -> None:
    headers = server["admin"] if operation.path.startswith("/v1/accounts") else server["user"]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    def check(case: Any) -> None:
        response = case.call_and_validate(
            base_url=server["base_url"],
            headers=headers,
            checks=[not_a_server_error, no_echoed_input],
        )
        expected = "text/plain" if operation.path == "/metrics" else "application/json"
        assert response.headers["content-type"][0].startswith(expected)
        if response.status_code >= 400:
            error = response.json()["error"]
            assert isinstance(error["code"], str) and isinstance(error["message"], str)

    check()
