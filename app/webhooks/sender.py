"""One signed webhook request to a checked address, and what came of it."""

import asyncio
import email.utils
import time
from datetime import UTC, datetime

import httpx
from standardwebhooks.webhooks import Webhook

from app.services.outbox import Outcome
from app.services.webhook_urls import UrlRefused, resolve
from app.text import storable

RESPONSE_CHARS = 2048  # of a receiver's answer, kept with the attempt
USER_AGENT = "autoprovision-webhooks/1"


def signature_header(msg_id: str, timestamp: datetime, payload: str, secrets: list[str]) -> str:
    """`webhook-signature`: one `v1,<base64>` per secret, space-separated (rotation overlap)."""
    return " ".join(Webhook(secret).sign(msg_id, timestamp, payload) for secret in secrets)


def retry_after_seconds(value: str | None, *, now: datetime) -> float | None:
    """A Retry-After header (seconds or an HTTP date) as seconds from now."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
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
        refused_ports: frozenset[int] = frozenset(),
    ) -> None:
        self.timeout_seconds = timeout_seconds
        self.allow_private = allow_private
        self.refused_ports = refused_ports
        self.client = httpx.AsyncClient(
            trust_env=False,  # an environment proxy would connect to the unchecked name
            follow_redirects=False,
            timeout=timeout_seconds,
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
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
        except (TimeoutError, httpx.TimeoutException):
            return Outcome(
                status_code=None,
                duration_ms=elapsed_ms(),
                error=f"no answer within {self.timeout_seconds:g} s",
            )
        except httpx.HTTPError as exc:
            return Outcome(
                status_code=None,
                duration_ms=elapsed_ms(),
                error=storable(_describe(exc))[:500],
            )
        retry_after = None
        if response.status_code in (429, 503):
            retry_after = retry_after_seconds(response.headers.get("retry-after"), now=now)
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


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
