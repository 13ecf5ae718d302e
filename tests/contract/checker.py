"""Requests and answers held against the providers' own API descriptions.

`tests/contract/specs/<provider>.json` is the part of each provider's OpenAPI document our
adapters use (derived by scripts/derive_provider_specs.py), read through the allow-list of
`allowances.py`. openapi-core does the checking: it validates both OpenAPI 3.0 (Hyperstack) and
3.1 (Verda), parameters and security as well as bodies, and it is maintained.

Three rules the documents alone would not enforce: a request body may carry no property the
document does not name (a field the provider does not know is dropped silently, such as a
misspelt `volume_ids`); nor may a simulator's answer (it would be our invention, or a renamed
field that a document without `required`, as Hyperstack's, lets by); and a status an operation
does not describe must carry the provider's error body (Verda's error table, Hyperstack's
`ErrorResponseModel`).
"""

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
from openapi_core import OpenAPI
from openapi_core.datatypes import RequestParameters
from openapi_core.templating.paths.exceptions import (
    OperationNotFound,
    PathNotFound,
    ServerNotFound,
)
from openapi_core.templating.responses.exceptions import ResponseNotFound
from werkzeug.datastructures import Headers, ImmutableMultiDict

from app.simulators.exchanges import Exchange
from tests.contract.allowances import ALLOWANCES

SPECS = Path(__file__).parent / "specs"
OUR_USER_AGENT = "autoprovision/"
# A credential header of the document's security scheme, present but masked in the log.
CREDENTIAL = "checked-elsewhere"


@dataclass
class WireRequest:
    """A request as openapi-core reads it (its `Request` protocol)."""

    host_url: str
    path: str
    method: str
    body: bytes | None
    content_type: str
    parameters: RequestParameters


@dataclass
class WireResponse:
    """An answer as openapi-core reads it (its `Response` protocol)."""

    status_code: int
    content_type: str
    data: bytes
    headers: Headers = field(default_factory=Headers)


class ProviderContract:
    """One provider's derived document, ready to check exchanges against."""

    def __init__(self, provider: str, document: dict[str, Any]) -> None:
        self.provider = provider
        self.document = document
        server = urlsplit(document["servers"][0]["url"])
        self.host_url = f"{server.scheme}://{server.netloc}"
        self.api = OpenAPI.from_dict(document)
        self.error_schema = _resolved(document, document["x-derived"]["errors"])
        self._checked: set[str] = set()

    def problems(self, exchange: Exchange) -> list[str]:
        """What is wrong with this exchange: its request when our adapter sent it, its answer
        on an operation the document describes unless a fault shaped it. Each answer is
        checked once per distinct content (polls repeat themselves)."""
        key = hashlib.sha256(
            repr(
                (exchange.method, exchange.path, exchange.query, exchange.body, exchange.status)
            ).encode()
            + exchange.answer_type.encode()
            + exchange.answer
            + exchange.user_agent.startswith(OUR_USER_AGENT).to_bytes(1, "big")
        ).hexdigest()
        if key in self._checked:
            return []
        self._checked.add(key)
        request = self._request(exchange)
        ours = exchange.user_agent.startswith(OUR_USER_AGENT)
        found: list[str] = []
        if ours:
            found += [f"request: {p}" for p in self._request_problems(request)]
        if exchange.status and not exchange.shaped_by_fault:
            found += [
                f"answer {exchange.status}: {p}"
                for p in self._answer_problems(request, exchange, known_only=not ours)
            ]
        where = f"{self.provider} {exchange.method} {exchange.path}"
        return [f"{where}: {p}" for p in found]

    def _request(self, exchange: Exchange) -> WireRequest:
        headers = Headers(exchange.headers)
        for name in _credential_headers(self.document):
            if name in exchange.headers:  # masked in the log; its scheme is what is checked
                scheme = exchange.headers[name].partition(" ")[0] if name == "authorization" else ""
                headers[name] = f"{scheme} {CREDENTIAL}".strip()
        return WireRequest(
            host_url=self.host_url,
            path=exchange.path,
            method=exchange.method.lower(),
            body=exchange.body or None,
            content_type=exchange.headers.get("content-type", "application/json"),
            parameters=RequestParameters(
                query=ImmutableMultiDict(exchange.query),
                header=headers,
                cookie=ImmutableMultiDict(),
                path={},
            ),
        )

    def _request_problems(self, request: WireRequest) -> Iterator[str]:
        for error in self.api.iter_request_errors(request):
            if isinstance(error, PathNotFound | OperationNotFound | ServerNotFound):
                yield (
                    "not an operation of the derived document (add it to USED in "
                    "scripts/derive_provider_specs.py, or stop sending it)"
                )
                return
            yield _said(error)
        if request.body:
            yield from self._unknown_fields(request)

    def _unknown_fields(self, request: WireRequest) -> Iterator[str]:
        operation = self._operation(request.method, request.path)
        content = (operation or {}).get("requestBody", {}).get("content", {})
        schema = content.get("application/json", {}).get("schema")
        if schema is None:
            return
        try:
            body = json.loads(request.body or b"")
        except ValueError:
            return
        yield from _unknown_properties(self.document, schema, body, "body")

    def _answer_problems(
        self, request: WireRequest, exchange: Exchange, *, known_only: bool
    ) -> Iterator[str]:
        if self._operation(request.method, request.path) is None:
            if not known_only:
                yield "not an operation of the derived document"
            return
        response = WireResponse(
            status_code=exchange.status,
            content_type=exchange.answer_type.split(";")[0].strip().lower(),
            data=exchange.answer,
        )
        for error in self.api.iter_response_errors(request, response):
            if isinstance(error, ResponseNotFound) and exchange.status >= 400:
                yield from self._error_body_problems(exchange)
                return
            yield _said(error)
        yield from self._invented_fields(request, exchange)

    def _invented_fields(self, request: WireRequest, exchange: Exchange) -> Iterator[str]:
        """An answer's properties the document does not name: a simulator's inventions (or a
        renamed field, which a document without `required`, as Hyperstack's, would let by)."""
        operation = self._operation(request.method, request.path) or {}
        answer = operation.get("responses", {}).get(str(exchange.status), {})
        schema = answer.get("content", {}).get("application/json", {}).get("schema")
        if schema is None:
            return
        try:
            body = json.loads(exchange.answer)
        except ValueError:
            return
        yield from _unknown_properties(self.document, schema, body, "answer")

    def _error_body_problems(self, exchange: Exchange) -> Iterator[str]:
        """An undescribed error status carries the provider's error body."""
        if exchange.status == 429 and self.provider == "hyperstack":
            return  # no body is documented for its 429 (hyperstack.md §1)
        try:
            body = json.loads(exchange.answer)
        except ValueError:
            yield "the error body is not JSON"
            return
        validator = jsonschema.Draft202012Validator(self.error_schema)
        for error in validator.iter_errors(body):
            yield f"error body: {error.message}"

    def _operation(self, method: str, path: str) -> dict[str, Any] | None:
        """The derived document's operation for `method` on this concrete `path`."""
        prefix = urlsplit(self.document["servers"][0]["url"]).path.rstrip("/")
        if not path.startswith(prefix):
            return None
        wanted = path[len(prefix) :].strip("/").split("/")
        for template, item in self.document["paths"].items():
            parts = template.strip("/").split("/")
            matches = len(parts) == len(wanted) and all(
                p == w or (p.startswith("{") and p.endswith("}"))
                for p, w in zip(parts, wanted, strict=True)
            )
            if matches and method in item:
                operation: dict[str, Any] = item[method]
                return operation
        return None


@cache
def contract_for(provider: str) -> ProviderContract | None:
    """The contract of a provider with a published document (None: QuantaCloud has none)."""
    path = SPECS / f"{provider}.json"
    if not path.exists():
        return None
    document = json.loads(path.read_text(encoding="utf-8"))
    ALLOWANCES[provider](document)
    return ProviderContract(provider, document)


def _said(error: Exception) -> str:
    """What openapi-core found, with the schema errors under it, on one line."""
    causes = []
    found = getattr(error.__cause__, "schema_errors", None) or getattr(error, "schema_errors", None)
    for inner in found or ():
        where = "/".join(str(p) for p in inner.absolute_path) or "(top)"
        causes.append(f"{where}: {inner.message}")
    if causes:  # the value itself is left out: the paths say where
        return f"{type(error).__name__}: " + "; ".join(causes[:8])
    return f"{type(error).__name__}: {error}"[:400]


def _credential_headers(document: dict[str, Any]) -> list[str]:
    schemes = document.get("components", {}).get("securitySchemes", {})
    names = ["authorization"]
    names += [s["name"].lower() for s in schemes.values() if s.get("in") == "header"]
    return names


def _resolved(document: dict[str, Any], ref: str) -> dict[str, Any]:
    """A `$ref`'s target with its own references inlined (for a plain JSON Schema check)."""
    node: Any = document
    for part in ref[2:].split("/"):
        node = node[part]
    inlined: dict[str, Any] = _inline(document, node)
    return inlined


def _inline(document: dict[str, Any], node: Any) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            return _resolved(document, node["$ref"])
        return {k: _inline(document, v) for k, v in node.items() if k != "nullable"}
    if isinstance(node, list):
        return [_inline(document, item) for item in node]
    return node


def _unknown_properties(
    document: dict[str, Any], schema: dict[str, Any], value: Any, where: str
) -> Iterator[str]:
    """Properties of `value` that `schema` does not name, where it lists its properties."""
    if "$ref" in schema:
        yield from _unknown_properties(document, _resolved(document, schema["$ref"]), value, where)
        return
    for key in ("allOf", "oneOf", "anyOf"):
        if key in schema:
            options = [_resolved_or(document, s) for s in schema[key]]
            named = {p for o in options for p in o.get("properties", {})}
            if isinstance(value, dict) and named:
                yield from (f"{where}.{k} is not in the document" for k in value if k not in named)
            return
    # `properties: {}` is how a generator writes a free-form object (the SDKs read a dict).
    if isinstance(value, dict) and schema.get("properties"):
        properties = schema["properties"]
        for name, item in value.items():
            if name not in properties:
                yield f"{where}.{name} is not in the document"
            else:
                yield from _unknown_properties(document, properties[name], item, f"{where}.{name}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from _unknown_properties(document, schema["items"], item, f"{where}[{index}]")


def _resolved_or(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    return _resolved(document, schema["$ref"]) if "$ref" in schema else schema
