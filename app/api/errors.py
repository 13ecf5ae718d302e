"""One JSON error shape for every failure: `{"error": {"code", "message", "details"?}}`."""

import logging
import re
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException

from app.core.errors import INVALID_JSON, AppError, InvalidJson, TooManyRequests
from app.core.text import quote

logger = logging.getLogger(__name__)

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,39}")
OVERLOADED_CODE = "overloaded"
RETRY_AFTER_SECONDS = 1

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def error_response(
    status_code: int,
    code: str,
    message: str,
    details: Any = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """The JSON error body with its status."""
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return JSONResponse({"error": error}, status_code=status_code, headers=headers)


def _field(loc: tuple[Any, ...]) -> str:
    # A location can be a key the client sent (an unknown field): quoted short, like input.
    parts = [
        p if isinstance(p, int) or _PLAIN_NAME.fullmatch(str(p)) else quote(p)
        for p in loc
        if p not in ("body", "query", "path", "header")
    ]
    return ".".join(str(p) for p in parts) or "body"


def _message(error: Mapping[str, Any]) -> str:
    context = error.get("ctx") or {}
    if error.get("type") == "too_short" and "min_length" in context:
        least = context["min_length"]
        return "must list at least one" if least == 1 else f"must list at least {least}"
    if error.get("type") == "too_long" and "max_length" in context:
        return f"must list at most {context['max_length']}"
    message = str(error.get("msg", "invalid"))
    return message.removeprefix("Value error, ")


def _validation_details(exc: RequestValidationError) -> list[dict[str, str]]:
    # Never echo the offending input back: it may be megabytes long or carry a secret.
    return [
        {"field": _field(tuple(e.get("loc", ()))), "message": _message(e)} for e in exc.errors()
    ]


async def _on_validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = _validation_details(exc)
    if any(e.get("type") == "json_invalid" for e in exc.errors()):
        return error_response(InvalidJson.status_code, InvalidJson.code, INVALID_JSON)
    summary = "; ".join(f"{d['field']}: {d['message']}" for d in details[:5])
    return error_response(422, "validation_error", summary or "invalid request", details)


async def _on_app_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AppError)
    headers: dict[str, str] = {}
    if exc.status_code == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    elif exc.status_code == 503:
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    elif isinstance(exc, TooManyRequests) and exc.retry_after is not None:
        headers = {"Retry-After": str(exc.retry_after)}
    return error_response(exc.status_code, exc.code, exc.message, exc.details, headers)


async def _on_http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
    return error_response(exc.status_code, code, message, headers=exc.headers)


async def _on_pool_timeout(_request: Request, _exc: Exception) -> JSONResponse:
    logger.warning("no database connection free within the pool timeout")
    message = f"no database connection is free; retry in {RETRY_AFTER_SECONDS} s"
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    return error_response(503, OVERLOADED_CODE, message, headers=headers)


async def _on_unexpected(_request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unhandled error", exc_info=exc)
    return error_response(500, "internal_error", "something went wrong on our side")


def install_error_handlers(app: FastAPI) -> None:
    """Route every kind of failure to the JSON error shape."""
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(AppError, _on_app_error)
    app.add_exception_handler(HTTPException, _on_http_error)
    app.add_exception_handler(PoolTimeout, _on_pool_timeout)
    app.add_exception_handler(Exception, _on_unexpected)
