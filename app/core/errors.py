"""Expected failures as exceptions that map onto one JSON error shape."""

from typing import Any


class AppError(Exception):
    """A failure the client can act on: rendered as `{"error": {"code", "message"}}`."""

    status_code = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details


class Unauthorized(AppError):
    """No API key, or one the service does not know."""

    status_code = 401
    code = "unauthorized"


class Forbidden(AppError):
    """A known key that may not do this."""

    status_code = 403
    code = "forbidden"


class NotFound(AppError):
    """Nothing by that id that this key may see."""

    status_code = 404
    code = "not_found"


class Conflict(AppError):
    """The request is valid but the thing is not in a state that allows it."""

    status_code = 409
    code = "conflict"


class TooManyOrders(Conflict):
    """The account already has as many orders waiting as it may."""

    code = "too_many_orders"


class ValidationFailed(AppError):
    """The request is well-formed but its content is not acceptable."""

    status_code = 422
    code = "validation_error"


def field_error(field: str, message: str) -> ValidationFailed:
    """A 422 naming one field of the request and what is wrong with it."""
    return ValidationFailed(f"{field}: {message}", details=[{"field": field, "message": message}])


class ProvidersNotEnabled(ValidationFailed):
    """Every provider an order accepts is one this service has no credentials for."""

    code = "providers_not_enabled"


class InsufficientFunds(Conflict):
    """The account's available balance does not cover the amount."""

    code = "insufficient_funds"


INVALID_JSON = "the request body is not valid JSON"


class InvalidJson(AppError):
    """A body that is not one UTF-8 JSON value without duplicate keys."""

    status_code = 422
    code = "invalid_json"


class UnsupportedMediaType(AppError):
    """A body sent as something other than JSON."""

    status_code = 415
    code = "unsupported_media_type"


class Overloaded(AppError):
    """More is being served at once than the service, or the caller's share of it, allows:
    answered with Retry-After."""

    status_code = 503
    code = "overloaded"


class TooManyRequests(AppError):
    """The caller already holds as many of something as it may (e.g. open event streams), or
    did something as often as it may; `retry_after`: seconds until it may again, if known."""

    status_code = 429
    code = "too_many_requests"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: Any = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message, code=code, details=details)
        self.retry_after = retry_after


class TooManyPlacements(TooManyRequests):
    """The account placed as many orders in the last hour as it may."""

    code = "too_many_placements"
