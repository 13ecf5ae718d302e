"""Every text a request can store is bounded before it reaches the database: PostgreSQL refuses
a string longer than its column (a 500), where SQLite keeps it. The schema walk holds every
route to that; the requests show the answers on both databases."""

import re
from collections.abc import Iterator
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import String
from sqlalchemy.orm import InstrumentedAttribute

from app.core.money import MONEY_PATTERN
from app.main import create_app
from app.settings import Settings
from app.storage.models import Account, IdempotencyKey, LedgerEntry, Order, WebhookEndpoint
from tests.factories import ADMIN, create_account
from tests.fixtures.settings import ADMIN_KEY, SECRET_KEY

READS = {"get", "head"}
# Strings bounded by what they are read as, not by a length: an amount (MONEY_PATTERN, a Decimal
# with a maximum), a moment (date-time), a page cursor (one fixed length).
_CURSOR_PATTERN = re.compile(r"\^[a-z]+_\[0-9a-z\]\{26\}\$")
# Where each text field of a request body is stored: its bound must fit the column.
STORED_IN: dict[tuple[str, str], InstrumentedAttribute[Any]] = {
    ("/v1/accounts", "name"): Account.name,
    ("/v1/accounts/{account_id}/credits", "note"): LedgerEntry.note,
    ("/v1/orders", "name"): Order.name,
    ("/v1/orders", "model"): Order.model,
    ("/v1/orders", "image"): Order.image,
    ("/v1/orders", "gpu_model"): Order.gpu_model,
    ("/v1/webhook-endpoints", "url"): WebhookEndpoint.url,
    ("/v1/webhook-endpoints", "description"): WebhookEndpoint.description,
    ("/v1/webhook-endpoints/{endpoint_id}", "url"): WebhookEndpoint.url,
    ("/v1/webhook-endpoints/{endpoint_id}", "description"): WebhookEndpoint.description,
}
# A body each route with an id in its path takes, so the id is what the answer is about.
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/accounts/{account_id}/credits"): {"amount": "1.00"},
    ("PATCH", "/v1/orders/{order_id}"): {"max_runtime_hours": 2},
    ("PATCH", "/v1/webhook-endpoints/{endpoint_id}"): {"description": "x"},
}


def _openapi() -> dict[str, Any]:
    app = create_app(Settings(_env_file=None, admin_api_key=ADMIN_KEY, secret_key=SECRET_KEY))
    return app.openapi()


def _resolved(schema: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _strings(schema: dict[str, Any], where: str, document: dict[str, Any]) -> Iterator[Any]:
    """(where, schema) for every string a value of `schema` can hold, deeply."""
    schema = _resolved(schema, document)
    outer = {"maxLength": schema["maxLength"]} if "maxLength" in schema else {}
    for key in ("anyOf", "oneOf", "allOf"):
        for option in schema.get(key, []):  # a length beside them bounds each string in them
            yield from _strings({**outer, **_resolved(option, document)}, where, document)
    if schema.get("type") == "string":
        yield where, schema
    for name, field in schema.get("properties", {}).items():
        yield from _strings(field, f"{where}.{name}", document)
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _strings(schema["additionalProperties"], f"{where}.*", document)
    if schema.get("type") == "array":
        yield from _strings(schema.get("items", {}), f"{where}[]", document)


def _inputs(document: dict[str, Any]) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """(method, path, where, schema) for every string a request to the API can carry."""
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                where = f"{parameter['in']}:{parameter['name']}"
                for found, schema in _strings(parameter["schema"], where, document):
                    yield method, path, found, schema
            for content in operation.get("requestBody", {}).get("content", {}).values():
                for found, schema in _strings(content["schema"], "body", document):
                    yield method, path, found, schema


def _bounded(schema: dict[str, Any]) -> bool:
    if "maxLength" in schema or "enum" in schema or "const" in schema:
        return True
    if schema.get("format") == "date-time":
        return True
    pattern = schema.get("pattern", "")
    return pattern == MONEY_PATTERN or _CURSOR_PATTERN.fullmatch(pattern) is not None


def test_every_text_a_request_can_store_has_a_bound_in_the_schema() -> None:
    """A path parameter (kept with an Idempotency-Key), a header or a body of a write: each
    string has a length it may not pass. Query parameters only look things up: reads alone
    take them."""
    document = _openapi()
    unbounded, written_queries = [], []
    for method, path, where, schema in _inputs(document):
        if where.startswith("query:"):
            if method not in READS:
                written_queries.append(f"{method.upper()} {path} {where}")
            continue
        if method in READS and not where.startswith("path:"):
            continue
        if not _bounded(schema):
            unbounded.append(f"{method.upper()} {path} {where}")
    assert unbounded == []
    assert written_queries == []


def _column_length(column: InstrumentedAttribute[Any]) -> int:
    kind = column.property.columns[0].type
    assert isinstance(kind, String) and kind.length is not None, column
    return kind.length


def test_each_bound_fits_the_column_it_is_stored_in() -> None:
    document = _openapi()
    lengths = {(p, w): s.get("maxLength") for m, p, w, s in _inputs(document) if m not in READS}
    for (path, field), column in STORED_IN.items():
        bound = lengths[(path, f"body.{field}")]
        assert bound is not None and bound <= _column_length(column), (path, field)
    idempotent = [
        (path, operation)
        for path, operations in document["paths"].items()
        for operation in operations.values()
        if any(p["name"] == "Idempotency-Key" for p in operation.get("parameters", []))
    ]
    assert len(idempotent) == 3  # placing an order, crediting an account, a demo top-up
    for path, operation in idempotent:
        longest = path
        for parameter in operation["parameters"]:
            if parameter["in"] == "path":
                filler = "x" * parameter["schema"]["maxLength"]
                longest = longest.replace("{" + parameter["name"] + "}", filler)
            if parameter["name"] == "Idempotency-Key":
                assert parameter["schema"]["maxLength"] <= _column_length(IdempotencyKey.key)
        assert len(longest) <= _column_length(IdempotencyKey.request_path), path


async def test_a_credit_with_a_key_to_an_overlong_account_id_is_a_clear_4xx(
    client: httpx.AsyncClient,
) -> None:
    """The 500 on PostgreSQL: the path overflowed the stored key's `request_path`."""
    account_id = "acc_" + "a" * 200
    response = await client.post(
        f"/v1/accounts/{account_id}/credits",
        json={"amount": "5.00"},
        headers={**ADMIN, "Idempotency-Key": "top-up-1"},
    )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert [d["field"] for d in error["details"]] == ["account_id"]
    assert "a" * 41 not in response.text
    account = await create_account(client)
    control = await client.post(
        f"/v1/accounts/{account.id}/credits",
        json={"amount": "5.00"},
        headers={**ADMIN, "Idempotency-Key": "top-up-1"},
    )
    assert control.status_code == 201


async def test_every_route_answers_an_overlong_id_with_a_4xx_and_one_at_its_bound_with_404(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """Walks every route with an id in its path, sending an Idempotency-Key with each write:
    the longest id the schema allows reaches the route's look-up (404 on either database), one
    character more is a 422 that does not repeat it."""
    account = await create_account(client)
    document = app.openapi()
    walked = []
    routes = [
        (method.upper(), template, operation)
        for template, operations in document["paths"].items()
        for method, operation in operations.items()
        if "{" in template
    ]
    for method, template, operation in routes:
        names = [p for p in operation["parameters"] if p["in"] == "path"]
        assert len(names) == 1, template
        bound = names[0]["schema"]["maxLength"]
        headers = ADMIN if template.startswith("/v1/accounts/") else account.headers
        if method != "GET":
            headers = {**headers, "Idempotency-Key": "k" * 255}
        body = BODIES.get((method, template))
        answers = {}
        for length in (bound, bound + 1, 2_000):
            url = re.sub(r"\{[^}]+\}", "z" * length, template)
            response = await client.request(method, url, json=body, headers=headers)
            assert response.json()["error"], (method, template, response.text)
            assert "z" * 41 not in response.text, (method, template)
            answers[length] = response.status_code
        assert answers == {bound: 404, bound + 1: 422, 2_000: 422}, (method, template)
        walked.append(f"{method} {template}")
    assert len(walked) >= 13  # orders, webhook endpoints and deliveries, credits, models
