"""Verda's REST API over HTTP: OAuth2 client-credentials tokens, refreshed before they expire."""

import asyncio
import time
from typing import Any

import httpx
from pydantic import SecretStr

from app.catalogue import Provider
from app.providers.base import AuthFailed, Rejected, Unavailable
from app.providers.http import ProviderHTTP, error_field

REFRESH_MARGIN = 60.0  # seconds before expiry at which a token is replaced


class VerdaAPI:
    """Authenticated requests to Verda; the credentials never leave this object."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str,
        client_id: SecretStr,
        client_secret: SecretStr,
        timeout: float,
        create_timeout: float,
    ) -> None:
        self.http = ProviderHTTP(Provider.VERDA, client, base_url, timeout, create_timeout)
        self._client_id = client_id
        self._client_secret = client_secret
        self._access: str | None = None
        self._refresh: str | None = None
        self._expires_at = 0.0
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"VerdaAPI(base_url={self.http.base_url!r})"

    async def public(self, path: str, *, params: Any = None) -> httpx.Response:
        """A request to an endpoint that needs no token (`/instance-types`)."""
        return await self.http.send("GET", path, params=params)

    async def request(
        self,
        method: str,
        path: str,
        *,
        is_create: bool = False,
        json: Any = None,
        params: Any = None,
    ) -> httpx.Response:
        """One authenticated request; on a 401, a new token and one more try."""
        token = await self.token()
        response = await self._send(token, method, path, is_create, json, params)
        if response.status_code != 401:
            return response
        # Verda checks the token before it does anything, so a 401 means the request, even a
        # create, had no effect: sending it once more with a new token cannot make a duplicate.
        # Any other failure on a create (timeout, 5xx) is never re-sent.
        self._forget(token)
        token = await self.token()
        return await self._send(token, method, path, is_create, json, params)

    async def _send(
        self, token: str, method: str, path: str, is_create: bool, json: Any, params: Any
    ) -> httpx.Response:
        return await self.http.send(
            method,
            path,
            is_create=is_create,
            json=json,
            params=params,
            headers={"Authorization": f"Bearer {token}"},
        )

    async def token(self) -> str:
        """A valid access token: the cached one, a refreshed one, or a new one."""
        async with self._lock:
            if self._access is None or time.monotonic() >= self._expires_at - REFRESH_MARGIN:
                return await self._authenticate()
            return self._access

    def _forget(self, token: str) -> None:
        if self._access == token:
            self._access = None
            self._expires_at = 0.0

    async def _authenticate(self) -> str:
        response = None
        if self._refresh is not None:
            response = await self._token_call(
                {"grant_type": "refresh_token", "refresh_token": self._refresh}
            )
            if response.status_code in (400, 401):
                response = None  # the refresh token is no longer good: start over
        if response is None:
            response = await self._token_call(
                {
                    "grant_type": "client_credentials",
                    "client_id": self._client_id.get_secret_value(),
                    "client_secret": self._client_secret.get_secret_value(),
                }
            )
        if response.status_code in (400, 401):
            code = error_field(self._body_or_none(response), "code")
            raise AuthFailed(
                Provider.VERDA,
                f"token request refused ({code or response.status_code})",
                status_code=response.status_code,
            )
        self.http.raise_common(response)
        if not response.is_success:
            raise Rejected(
                Provider.VERDA,
                f"token request answered {response.status_code}",
                status_code=response.status_code,
            )
        return self._store(self.http.json(response))

    async def _token_call(self, body: dict[str, str]) -> httpx.Response:
        return await self.http.send("POST", "/oauth2/token", json=body)

    def _store(self, body: Any) -> str:
        access = body.get("access_token") if isinstance(body, dict) else None
        refresh = body.get("refresh_token") if isinstance(body, dict) else None
        expires_in = body.get("expires_in") if isinstance(body, dict) else None
        if (
            not isinstance(access, str)
            or not access
            or isinstance(expires_in, bool)
            or not isinstance(expires_in, int | float)
        ):
            raise Unavailable(Provider.VERDA, "token response is missing its fields")
        self._access = access
        self._refresh = refresh if isinstance(refresh, str) and refresh else None
        self._expires_at = time.monotonic() + float(expires_in)
        return access

    @staticmethod
    def _body_or_none(response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            return None
