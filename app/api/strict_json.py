"""One strict reading of every JSON request body: UTF-8, `application/json`, no duplicate keys.

Routes that take a body use `StrictJsonRoute`; it reads and parses the body before FastAPI
does and hands FastAPI the parsed value, so the lenient `json.loads` (last duplicate key wins,
any encoding `json` can detect, `NaN`) never sees it. Every body that is not one JSON value is
the same `422 invalid_json`; a body of another media type is `415 unsupported_media_type`.
"""

import email.message
import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from app.core.errors import INVALID_JSON, InvalidJson, UnsupportedMediaType
from app.core.text import quote


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise InvalidJson(f"{INVALID_JSON}: the key {quote(key)} appears twice")
        found[key] = value
    return found


def _refuse_constant(name: str) -> Any:
    raise InvalidJson(f"{INVALID_JSON}: {name} is not a JSON number")


def parse_json_body(body: bytes) -> Any:
    """The one JSON value `body` holds, read strictly (InvalidJson otherwise)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidJson(f"{INVALID_JSON}: it must be UTF-8") from exc
    if text.startswith("\ufeff"):
        raise InvalidJson(f"{INVALID_JSON}: it must be UTF-8 without a byte order mark")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant)
    except ValueError as exc:  # JSONDecodeError, and int() of a number too long to convert
        raise InvalidJson(INVALID_JSON) from exc
    except RecursionError as exc:
        raise InvalidJson(f"{INVALID_JSON}: it is nested too deeply") from exc


def _is_json(content_type: str) -> bool:
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    charset = message.get_param("charset")
    utf8 = charset is None or str(charset).lower().replace("-", "") == "utf8"
    wanted = subtype == "json" or subtype.endswith("+json")
    return message.get_content_maintype() == "application" and wanted and utf8


class StrictJsonRoute(APIRoute):
    """An APIRoute whose JSON body, if it takes one, is read by `parse_json_body`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler, behind the strict reading of the body."""
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler
        required = self.body_field.field_info.is_required()

        async def strict(request: Request) -> Response:
            body = await request.body()
            if body:
                content_type = request.headers.get("content-type")
                if not content_type or not _is_json(content_type):
                    raise UnsupportedMediaType(
                        "send the body as UTF-8 JSON with Content-Type: application/json"
                    )
                # FastAPI's own read gives this value back instead of parsing again.
                request._json = parse_json_body(body)
            elif required:
                raise InvalidJson(f"{INVALID_JSON}: the body is empty")
            return await handler(request)

        return strict
