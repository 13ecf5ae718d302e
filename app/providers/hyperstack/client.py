"""Hyperstack's HTTP layer: the `api_key` header, JSON envelopes and error bodies."""

from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import SecretStr

from app.catalogue import Provider
from app.providers.base import Unavailable
from app.providers.http import ProviderHTTP, error_field


@dataclass(frozen=True)
class Answer:
    """One Hyperstack response that was not a 401/403/429/5xx: its status and JSON body."""

    status: int
    body: Any
    where: str

    @property
    def ok(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status < 300

    @property
    def reason(self) -> str | None:
        """The error envelope's `error_reason` (some errors omit it)."""
        return error_field(self.body, "error_reason")

    @property
    def message(self) -> str:
        """The envelope's `message`, for people (never for deciding anything)."""
        return error_field(self.body, "message") or f"HTTP {self.status}"

    def field(self, key: str) -> Any:
        """A top-level field of a JSON object body, or None."""
        return self.body.get(key) if isinstance(self.body, dict) else None


class HyperstackClient:
    """Sends requests to the Infrahub API with the key and turns transport failures into types."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str,
        api_key: SecretStr,
        timeout: float,
        create_timeout: float,
    ) -> None:
        self.http = ProviderHTTP(
            Provider.HYPERSTACK,
            client,
            base_url,
            timeout=timeout,
            create_timeout=create_timeout,
        )
        self._api_key = api_key

    def __repr__(self) -> str:
        return f"HyperstackClient(base_url={self.http.base_url!r})"

    async def call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        is_create: bool = False,
    ) -> Answer:
        """Send one request; 401/403, 429, 5xx, timeouts and non-JSON successes raise typed."""
        response = await self.http.send(
            method,
            path,
            params=params,
            json=json,
            is_create=is_create,
            headers={"api_key": self._api_key.get_secret_value(), "Accept": "application/json"},
        )
        self.http.raise_common(response, is_create=is_create)
        where = f"{method} {path}"
        if 200 <= response.status_code < 300:
            return Answer(
                response.status_code, self.http.json(response, is_create=is_create), where
            )
        try:
            body = response.json()
        except ValueError:
            body = None
        return Answer(response.status_code, body, where)

    async def read(self, path: str, params: dict[str, Any] | None = None) -> Answer:
        """A GET that must succeed: any other answer is `Unavailable`."""
        answer = await self.call("GET", path, params=params)
        if not answer.ok:
            raise self.unexpected(answer)
        return answer

    def unexpected(self, answer: Answer, what: str = "answered") -> Unavailable:
        """A read that got an answer we cannot use."""
        return Unavailable(
            Provider.HYPERSTACK,
            f"{answer.where} {what} {answer.status}: {answer.message}",
            status_code=answer.status,
        )
