"""HTTP plumbing shared by the adapters: timeouts, transport failures, JSON, Retry-After.

The one rule that matters: a failure on a create call is `OutcomeUnknown` (the VM may exist),
the same failure on anything else is `Unavailable` (nothing happened; try again later).
"""

import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import certifi
import httpx

from app.core.catalogue import Provider
from app.providers.base import (
    AuthFailed,
    HeldBack,
    OutcomeUnknown,
    RateLimited,
    Unavailable,
    is_urgent,
)
from app.providers.budget import Budget, Published
from app.providers.headroom import Headroom
from app.support.metrics import (
    PROVIDER_CONNECTIONS,
    PROVIDER_RATE_LIMIT_HELD,
    PROVIDER_RATE_LIMIT_LEFT,
)

USER_AGENT = "autoprovision/0.1"

# One client, or several ("lanes", each with its own connection pool) to keep a warm
# connection to each provider for each of several creates sent at once.
Connections = httpx.AsyncClient | Sequence[httpx.AsyncClient]


@dataclass
class ProviderHTTP:
    """One provider's base URL and timeouts over injected `httpx.AsyncClient`s, and its rate
    limits: every request sent is written down in `budget`.

    With several clients (lanes), requests other than creates take the lanes in turn, so each
    lane keeps a connection to the provider open; a create takes an idle lane, the one used
    last, so that creates sent at once each find an open connection and none waits behind a
    read (an httpx pool hands a request its first idle connection, so within one pool the
    others would go cold and close)."""

    provider: Provider
    client: Connections
    base_url: str
    timeout: float = 10.0
    create_timeout: float = 30.0
    published: Published = field(default_factory=Published)
    headroom: Headroom = field(default_factory=Headroom)
    budget: Budget = field(init=False)

    def __post_init__(self) -> None:
        clients = self.client
        self.lanes = [clients] if isinstance(clients, httpx.AsyncClient) else list(clients)
        self._in_flight = [0] * len(self.lanes)
        self._used_at = [0] * len(self.lanes)
        self._uses = 0
        self._turn = 0
        self.budget = Budget(
            self.published.rate_limits,
            create=self.published.create,
            is_stock_read=self.published.is_stock_read,
            headroom=self.headroom,
            clock=self.headroom.clock,
        )

    async def send(
        self,
        method: str,
        path: str,
        *,
        is_create: bool = False,
        json: Any = None,
        params: Any = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """Send one request; transport failures become typed outcomes."""
        timeout = self.create_timeout if is_create else self.timeout
        provider = str(self.provider)
        held = self.headroom.wait_before(method, path, is_create=is_create)
        kept_for_reads = 0.0 if is_create else self.budget.hold(method, path, urgent=is_urgent())
        if kept_for_reads > held:
            PROVIDER_RATE_LIMIT_HELD.labels(provider).inc()
            raise HeldBack(
                self.provider,
                f"{method} {path}: held back {kept_for_reads:.0f} s: the rest of the rate limit "
                "is kept for stock reads, creates and deletes",
                retry_after=kept_for_reads,
            )
        if held > 0:
            PROVIDER_RATE_LIMIT_HELD.labels(provider).inc()
            raise HeldBack(
                self.provider,
                f"{method} {path}: the provider reports its rate limit used up; held back "
                f"{held:.0f} s instead of asking for a 429",
                retry_after=held,
            )
        opened = PROVIDER_CONNECTIONS.labels(provider, "create" if is_create else "other")

        async def trace(event: str, _info: dict[str, Any]) -> None:
            if event == "connection.connect_tcp.complete":
                opened.inc()

        self.budget.sent(method, path)
        lane = self._lane(is_create)
        self._in_flight[lane] += 1
        try:
            response = await self.lanes[lane].request(
                method,
                self.base_url.rstrip("/") + path,
                json=json,
                params=params,
                headers={"User-Agent": USER_AGENT, **(headers or {})},
                timeout=timeout,
                follow_redirects=False,
                extensions={"trace": trace},
            )
        except httpx.TimeoutException as exc:
            raise self.failure(f"{method} {path} timed out", is_create) from exc
        except httpx.TransportError as exc:
            raise self.failure(f"{method} {path} failed: {type(exc).__name__}", is_create) from exc
        finally:
            self._in_flight[lane] -= 1
        self.headroom.note(method, path, response.headers.get("ratelimit"))
        for bucket, left in self.headroom.remaining().items():
            PROVIDER_RATE_LIMIT_LEFT.labels(provider, bucket).set(left)
        return response

    def _lane(self, is_create: bool) -> int:
        """Which client sends the next request (see the class docstring)."""
        idle = [i for i, busy in enumerate(self._in_flight) if not busy]
        if is_create:
            lane = max(idle, key=self._used_at.__getitem__) if idle else self._turn
        else:
            count = len(self.lanes)
            turns = [(self._turn + step) % count for step in range(1, count + 1)]
            lane = next((i for i in turns if not self._in_flight[i]), turns[0])
            self._turn = lane
        self._uses += 1
        self._used_at[lane] = self._uses
        return lane

    def failure(
        self, message: str, is_create: bool, status_code: int | None = None
    ) -> Unavailable | OutcomeUnknown:
        """The right outcome for a call that got no usable answer."""
        kind = OutcomeUnknown if is_create else Unavailable
        return kind(self.provider, message, status_code=status_code)

    def json(self, response: httpx.Response, *, is_create: bool = False) -> Any:
        """The response body as JSON, or a typed failure if it is not JSON."""
        try:
            return response.json()
        except ValueError as exc:
            raise self.failure(
                f"{response.request.method} {response.request.url.path} answered "
                f"{response.status_code} with a body that is not JSON",
                is_create,
                response.status_code,
            ) from exc

    def raise_common(self, response: httpx.Response, *, is_create: bool = False) -> None:
        """Raise for the statuses every provider means the same way: 401/403, 429, 5xx."""
        status = response.status_code
        where = f"{response.request.method} {response.request.url.path}"
        if status in (401, 403):
            raise AuthFailed(self.provider, f"{where}: credentials refused", status_code=status)
        if status == 429:
            raise RateLimited(
                self.provider, f"{where}: rate limited", retry_after=retry_after(response)
            )
        if status >= 500:
            raise self.failure(f"{where}: provider error {status}", is_create, status)


def retry_after(response: httpx.Response) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or HTTP date), if there is one."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - datetime.now(UTC)).total_seconds())


def wire_decimal(value: Any) -> Decimal | None:
    """A JSON number or numeric string as a Decimal (via `str`, never float arithmetic)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        result = Decimal(str(value).strip())
    except InvalidOperation:
        return None
    return result if result.is_finite() else None


def error_field(body: Any, *path: str) -> str | None:
    """A string nested in a JSON error body (e.g. `error_field(b, "error", "code")`), if present."""
    current = body
    for key in path:
        if not isinstance(current, dict):
            return None
        current = current.get(key)
    return current if isinstance(current, str) else None


def provider_tls(ca_file: Path | None) -> ssl.SSLContext | bool:
    """How provider APIs' certificates are checked: against the usual authorities, and those
    in `ca_file` too when one is given (`AUTOPROVISION_PROVIDER_CA_FILE`). Never unchecked."""
    if ca_file is None:
        return True
    context = ssl.create_default_context(cafile=certifi.where())
    context.load_verify_locations(cafile=str(ca_file))
    return context
