"""The REST API over httpx, and the one place where every failure becomes a one-line error with
the exit code it means.

Exit codes: 0 done; 1 refused (the API turned down a valid request: 409, 429; or the order a
`watch --until` waited for failed, was cancelled or expired, or did not get there in time);
2 bad input (bad options, or the API said 400, 401, 403, 404, 405, 413, 422: fix the command,
not the service); 3 the service cannot be reached (connection refused or broken, no answer in
time, 5xx, or an answer that is not the API's JSON).
"""

import contextlib
import dataclasses
import os
import time
from dataclasses import dataclass, field
from enum import IntEnum
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"  # the service's default host and port (AUTOPROVISION_PORT)
URL_ENV = "AUTOPROVISION_API_URL"
KEY_ENV = "AUTOPROVISION_API_KEY"
TIMEOUT_SECONDS = 10.0
PLACE_RETRY_PAUSE_SECONDS = 0.2
USER_AGENT = "autoprovision-cli"


class Exit(IntEnum):
    """What a client command's exit code says."""

    OK = 0
    REFUSED = 1
    BAD_INPUT = 2
    UNREACHABLE = 3


class ClientError(Exception):
    """A failure the command reports in one line on stderr, then exits with `exit_code`."""

    def __init__(self, message: str, exit_code: Exit, code: str | None = None) -> None:
        super().__init__(" ".join(message.split()))
        self.exit_code = exit_code
        self.code = code  # the API's error code, when the API refused


def exit_code_for(status: int) -> Exit:
    """The exit code an HTTP error status means for the command that got it."""
    if status >= 500:
        return Exit.UNREACHABLE
    if status in (409, 429):
        return Exit.REFUSED
    if status >= 400:
        return Exit.BAD_INPUT
    return Exit.UNREACHABLE  # a 1xx or 3xx: not what the API answers


@dataclass(frozen=True)
class Target:
    """Where the service is and the account key to send it (never shown)."""

    url: str
    key: str = field(repr=False)

    @classmethod
    def resolve(cls, url: str | None, key: str | None) -> "Target":
        """The options, else the environment, else the default URL; checked before any request."""
        url = (url or os.environ.get(URL_ENV) or DEFAULT_URL).strip().rstrip("/")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ClientError(
                f"--url (or {URL_ENV}) must be an http:// or https:// address such as "
                f"{DEFAULT_URL}",
                Exit.BAD_INPUT,
            )
        key = (key or os.environ.get(KEY_ENV) or "").strip()
        if not key:
            raise ClientError(
                f"no API key: pass --key or set {KEY_ENV} to your account's key (ap_live_...)",
                Exit.BAD_INPUT,
            )
        if not (key.isascii() and key.isprintable()) or " " in key:
            raise ClientError(
                f"the API key (--key or {KEY_ENV}) has characters no API key has", Exit.BAD_INPUT
            )
        return cls(url=url, key=key)

    @property
    def shown(self) -> str:
        """The URL without any user name or password in it, for messages."""
        parts = urlsplit(self.url)
        netloc = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    def headers(self) -> dict[str, str]:
        """The headers every request carries."""
        return {"Authorization": f"Bearer {self.key}", "User-Agent": USER_AGENT}


def api_path(*parts: str) -> str:
    """`/v1/` and the parts, each quoted whole (an id cannot reach another path)."""
    return "/v1/" + "/".join(quote(part, safe="") for part in parts)


@dataclass(frozen=True)
class Answer:
    """A successful answer: its JSON, and its text as sent (what `--json` prints)."""

    body: Any
    text: str
    replayed: bool = False  # the answer a request with the same Idempotency-Key got before


def answer_of(response: httpx.Response, target: Target) -> Answer:
    """The JSON of a 2xx answer (its body read already), or the ClientError the answer means."""
    if not response.is_success:
        raise refusal(response, target)
    try:
        replayed = response.headers.get("Idempotent-Replayed") == "true"
        return Answer(body=response.json(), text=response.text, replayed=replayed)
    except ValueError:
        raise ClientError(
            f"{target.shown} answered HTTP {response.status_code} without JSON: is it the "
            "autoprovision service?",
            Exit.UNREACHABLE,
        ) from None


def refusal(response: httpx.Response, target: Target) -> ClientError:
    """The ClientError for an error answer, from the API's `{"error": {code, message}}`."""
    status = response.status_code
    error: Any = None
    with contextlib.suppress(ValueError, AttributeError):
        error = response.json().get("error")
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        reason = response.reason_phrase or "error"
        return ClientError(
            f"{target.shown} answered HTTP {status} ({reason}) without the API's error: is it "
            "the autoprovision service?",
            exit_code_for(status),
        )
    message = f"{error['message']} ({error.get('code', 'error')}, HTTP {status})"
    if status == 401:
        message += f"; check --key or {KEY_ENV}"
    elif status >= 500:
        message = f"the service at {target.shown} failed: {message}"
        if "Retry-After" in response.headers:
            message += f"; retry in {response.headers['Retry-After']} s"
    return ClientError(message, exit_code_for(status), code=error.get("code"))


def unreachable(exc: httpx.TransportError, target: Target, retry_key: str | None) -> ClientError:
    """The ClientError for a request that got no answer."""
    if isinstance(exc, httpx.TimeoutException):
        reason = "no answer in time"
    elif isinstance(exc, httpx.ConnectError):
        reason = "connection refused" if _refused(exc) else str(exc) or "cannot connect"
    else:
        reason = "the connection broke before the answer came"
    message = f"cannot reach the service at {target.shown}: {reason}"
    if retry_key is not None:
        message += (
            f"; whether it was done is unknown: run the same command again with "
            f"--idempotency-key {retry_key} and it is done at most once"
        )
    return ClientError(message, Exit.UNREACHABLE)


def _refused(exc: BaseException) -> bool:
    """Whether a connection was refused, wherever in the chain of causes it says so."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError) or "refused" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class Api:
    """A synchronous client of the REST API for one command."""

    def __init__(self, target: Target, timeout: float = TIMEOUT_SECONDS) -> None:
        self.target = target
        self._client = httpx.Client(base_url=target.url, headers=target.headers(), timeout=timeout)

    def __enter__(self) -> "Api":
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._client.close()

    def get(self, path: str, params: dict[str, Any] | None = None) -> Answer:
        """GET `path` with the query `params` (None values left out)."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self._client.get(path, params=query)
        except httpx.TransportError as exc:
            raise unreachable(exc, self.target, retry_key=None) from None
        return answer_of(response, self.target)

    def post(self, path: str, body: Any = None, *, idempotency_key: str | None = None) -> Answer:
        """POST `body`; with an Idempotency-Key, once more with it if no answer came."""
        # The service does the work at most once per key, so a retry can never place twice.
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        tries = 2 if idempotency_key else 1
        failure: httpx.TransportError | None = None
        for attempt in range(tries):
            if attempt:
                time.sleep(PLACE_RETRY_PAUSE_SECONDS)
            try:
                response = self._client.post(path, json=body, headers=headers)
            except httpx.TransportError as exc:
                failure = exc
                continue
            answer = answer_of(response, self.target)
            # A replay of our own first try is not news; one of an earlier command is.
            return dataclasses.replace(answer, replayed=answer.replayed and not attempt)
        assert failure is not None
        raise unreachable(failure, self.target, retry_key=idempotency_key) from None

    def patch(self, path: str, body: Any) -> Answer:
        """PATCH `body` (not retried: a client that got no answer reads the order again)."""
        try:
            response = self._client.patch(path, json=body)
        except httpx.TransportError as exc:
            raise unreachable(exc, self.target, retry_key=None) from None
        return answer_of(response, self.target)


def async_client(target: Target, *, read_timeout: float) -> httpx.AsyncClient:
    """An async client for the event stream, which waits up to `read_timeout` for each read."""
    timeout = httpx.Timeout(TIMEOUT_SECONDS, read=read_timeout)
    return httpx.AsyncClient(base_url=target.url, headers=target.headers(), timeout=timeout)
