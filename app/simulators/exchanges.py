"""What a simulated API was sent and what it answered: the request log every simulator keeps
(`GET /<provider>/_sim/requests`), and, when a test asks for it, every exchange whole, so that
it can be held against the provider's own API description."""

import json
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

# Body fields that carry a credential or a start-up script: never shown, whatever the depth.
MASKED_FIELDS = frozenset(
    {"client_secret", "client_id", "refresh_token", "access_token", "api_key", "password",
     "script", "user_data", "token"}
)  # fmt: skip
# Request headers that carry a credential.
MASKED_HEADERS = frozenset({"authorization", "api_key", "x-api-key", "cookie"})
MASK = "***"


def masked(value: Any) -> Any:
    """A JSON value with every credential or script field's value replaced by `***`."""
    if isinstance(value, dict):
        return {k: MASK if k in MASKED_FIELDS else masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(item) for item in value]
    return value


def body_view(raw: bytes) -> Any:
    """A request body as the request log shows it: its JSON (masked), its text when it is not
    JSON, or None when there was none."""
    if not raw:
        return None
    try:
        return masked(json.loads(raw))
    except ValueError:
        return raw.decode("utf-8", "replace")


@dataclass
class LoggedRequest:
    """One request a simulated API received (its query as pairs, its body masked), and when
    and how it was answered (Unix seconds)."""

    method: str
    path: str
    received_at: float
    query: list[tuple[str, str]] = field(default_factory=list)
    body: Any = None
    answered_at: float | None = None
    status: int | None = None


@dataclass
class Exchange:
    """One request and its answer, whole (credential headers masked): what a contract test
    checks. `shaped_by_fault`: a queued fault decided the answer (a 500, a refused delete, an
    unknown status...), so it shows what the test asked for, not what the provider says."""

    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: bytes
    status: int = 0
    answer_type: str = ""
    answer: bytes = b""
    shaped_by_fault: bool = False

    @property
    def user_agent(self) -> str:
        """Who sent it (`autoprovision/...` for our adapters)."""
        return self.headers.get("user-agent", "")


# The exchange being answered in this task, for the faults that shape an answer to mark it.
CURRENT: ContextVar[Exchange | None] = ContextVar("simulated_exchange", default=None)


def mark_shaped_by_fault() -> None:
    """The answer being made now is a fault's (see `Exchange.shaped_by_fault`)."""
    exchange = CURRENT.get()
    if exchange is not None:
        exchange.shaped_by_fault = True


def headers_of(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """ASGI headers as a dict of lower-case names, credentials masked."""
    found = {}
    for name, value in raw:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        if key == "authorization":  # the scheme stays: it is part of the contract
            scheme, _, secret = text.partition(" ")
            found[key] = f"{scheme} {MASK}" if secret else MASK
        else:
            found[key] = MASK if key in MASKED_HEADERS else text
    return found
