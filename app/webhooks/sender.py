"""One signed webhook request to a checked address, and what came of it."""

import asyncio
import email.utils
import logging
import time
from datetime import UTC, datetime

import httpx
from standardwebhooks.webhooks import Webhook

from app.core.text import storable
from app.services.webhooks.outbox import Outcome
from app.services.webhooks.urls import UrlRefused, resolve

RESPONSE_CHARS = 2048  # of a receiver's answer, kept with the attempt
ERROR_CHARS = 500  # of an attempt's error text
MAX_RETRY_AFTER_DIGITS = 9  # longer is no delay one would wait for; int() stays cheap
USER_AGENT = "autoprovision-webhooks/1"
log = logging.getLogger(__name__)


def signature_header(msg_id: str, timestamp: datetime, payload: str, secrets: list[str]) -> str:
    """`webhook-signature`: one `v1,<base64>` per secret, space-separated (rotation overlap)."""
    return " ".join(Webhook(secret).sign(msg_id, timestamp, payload) for secret in secrets)


def retry_after_seconds(value: str | None, *, now: datetime) -> float | None:
    """A Retry-After header (seconds or an HTTP date) as seconds from now."""
    if not value:
        return None
    value = value.strip()
    # str.isdigit() is true for superscript and fullwidth digits: float() refuses some.
    if value.isascii() and value.isdigit():
        return float(value) if len(value) <= MAX_RETRY_AFTER_DIGITS else None
    if not value.isascii() or len(value) > 64:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - now).total_seconds(), 0.0)


class WebhookSender:
    """Sends signed webhooks without proxies, redirects or unchecked addresses."""

    def __init__(
        self,
        *,
        timeout_seconds: float,
        allow_private: bool,
        connect_timeout_seconds: float = 3.0,
        first_byte_timeout_seconds: float = 10.0,
        refused_ports: frozenset[int] = frozenset(),
    ) -> None:
        self.timeout_seconds = timeout_seconds
        self.allow_private = allow_private
        self.refused_ports = refused_ports
        # The read timeout bounds the wait for the answer's headers (and each later chunk);
        # the overall one (asyncio.timeout in send) bounds the whole attempt.
        self.timeouts = httpx.Timeout(
            timeout_seconds,
            connect=min(connect_timeout_seconds, timeout_seconds),
            read=min(first_byte_timeout_seconds, timeout_seconds),
        )
        self.client = httpx.AsyncClient(
            trust_env=False,  # an environment proxy would connect to the unchecked name
            follow_redirects=False,
            timeout=self.timeouts,
            # No connection cap: the dispatcher bounds sends in flight (per endpoint, account
            # and in all), so a send never waits in the pool behind another tenant's sockets.
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=50),
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()

    async def send(self, url: str, *, msg_id: str, payload: str, secrets: list[str]) -> Outcome:
        """POST `payload` to `url`, signed with every secret; faults come back as outcomes."""
        started = time.monotonic()

        def elapsed_ms() -> int:
            return round((time.monotonic() - started) * 1000)

        try:
            target = await resolve(
                url, allow_private=self.allow_private, refused_ports=self.refused_ports
            )
        except UrlRefused as exc:
            return Outcome(status_code=None, duration_ms=elapsed_ms(), error=f"refused: {exc}")
        now = datetime.now(UTC)
        headers = {
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "host": target.host_header,
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signature_header(msg_id, now, payload, secrets),
        }
        extensions = {"sni_hostname": target.sni_hostname} if target.url.scheme == "https" else {}
        request = self.client.build_request(
            "POST",
            target.pinned_url,
            content=payload.encode(),
            headers=headers,
            extensions=extensions,
        )
        try:
            async with asyncio.timeout(self.timeout_seconds):
                response = await self.client.send(request, stream=True)
                try:
                    body = await _read_start(response)
                finally:
                    await response.aclose()
            retry_after = None
            if response.status_code in (429, 503):
                retry_after = retry_after_seconds(response.headers.get("retry-after"), now=now)
        except httpx.ConnectTimeout:
            return _failed(elapsed_ms(), f"no connection within {self.timeouts.connect:g} s")
        except httpx.ReadTimeout:
            return _failed(elapsed_ms(), f"no answer within {self.timeouts.read:g} s")
        except (TimeoutError, httpx.TimeoutException):
            return _failed(elapsed_ms(), f"no answer within {self.timeout_seconds:g} s")
        except httpx.HTTPError as exc:
            return _failed(elapsed_ms(), _describe(exc))
        except Exception as exc:
            # Whatever the receiver's answer made go wrong is still an attempt on the schedule;
            # the message may hold anything, so only its type is kept.
            log.warning("sending webhook %s failed unexpectedly (%s)", msg_id, type(exc).__name__)
            return _failed(elapsed_ms(), f"the answer could not be handled ({type(exc).__name__})")
        return Outcome(
            status_code=response.status_code,
            duration_ms=elapsed_ms(),
            response_body=body,
            retry_after_seconds=retry_after,
        )


async def _read_start(response: httpx.Response) -> str:
    """The first RESPONSE_CHARS characters of the body; the rest is never read."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= RESPONSE_CHARS * 4:  # enough bytes for RESPONSE_CHARS UTF-8 characters
            break
    return storable(b"".join(chunks).decode("utf-8", errors="replace")[:RESPONSE_CHARS])


def _failed(duration_ms: int, error: str) -> Outcome:
    return Outcome(status_code=None, duration_ms=duration_ms, error=storable(error)[:ERROR_CHARS])


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
