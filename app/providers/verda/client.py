"""Verda's REST API over HTTP: OAuth2 client-credentials tokens refreshed in the background
before they expire (never on a request's path while one is usable), one method per call, and
every failure as a typed outcome of `providers.base`.

Errors are keyed on the status and Verda's error `code`, never the message.
"""

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import SecretStr

from app.providers.base import (
    AuthFailed,
    NoCapacity,
    OutcomeUnknown,
    ProviderError,
    ProviderOutOfFunds,
    Rejected,
    Unavailable,
)
from app.providers.http import Connections, ProviderHTTP, error_field
from app.providers.refusals import create_refusal, sent_fields
from app.providers.verda import limits, parse
from app.providers.verda.parse import PROVIDER

logger = logging.getLogger(__name__)

REFRESH_MARGIN = 60.0  # a token is replaced this long before it expires (half its life if shorter)
EXPIRY_SAFETY = 2.0  # a token with less left than this is not sent: it could expire in flight


class DeleteRefused(Rejected):
    """Verda refused to delete an instance (the answer says no more than its status)."""


class VerdaClient:
    """Authenticated requests to Verda; the credentials never leave this object."""

    def __init__(
        self,
        client: Connections,
        *,
        base_url: str,
        client_id: SecretStr,
        client_secret: SecretStr,
        timeout: float,
        create_timeout: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.http = ProviderHTTP(
            PROVIDER,
            client,
            base_url,
            timeout,
            create_timeout,
            published=limits.PUBLISHED,
        )
        self._client_id = client_id
        self._client_secret = client_secret
        self._clock = clock
        self._access: str | None = None
        self._refresh: str | None = None
        self._expires_at = 0.0
        self._refresh_at = 0.0
        self._lock = asyncio.Lock()
        self._refreshing: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"VerdaClient(base_url={self.http.base_url!r})"

    # --- the calls -------------------------------------------------------------------------

    async def instance_types(self) -> Any:
        """`GET /instance-types` (public; prices as decimal strings in USD)."""
        return self.read(await self.http.send("GET", "/instance-types", params={"currency": "usd"}))

    async def volume_types(self) -> Any:
        """`GET /volume-types` (public; each storage type's price per GB-month in USD)."""
        return self.read(await self.http.send("GET", "/volume-types", params={"currency": "usd"}))

    async def availability(self) -> Any:
        """`GET /instance-availability`: on-demand stock per location."""
        return self.read(
            await self.request("GET", "/instance-availability", params={"is_spot": "false"})
        )

    async def type_availability(self, instance_type: str) -> bool:
        """`GET /instance-availability/{instance_type}`: whether it is in stock anywhere."""
        body = self.read(
            await self.request(
                "GET",
                limits.type_read(instance_type)[0][1],
                params={"is_spot": "false"},
            )
        )
        if not isinstance(body, bool):
            raise Unavailable(PROVIDER, f"availability of {instance_type}: not true or false")
        return body

    async def create_instance(self, body: dict[str, Any], *, where: str) -> str:
        """`POST /instances`; the new instance's id (Verda answers 202 with the bare id)."""
        response = await self.request("POST", "/instances", is_create=True, json=body)
        return self.created(response, where=where, what="an instance")

    def created(self, response: httpx.Response, *, where: str, what: str) -> str:
        """The new id in a create's answer (`what` was made: "an instance"); any other answer
        as its outcome: `NoCapacity` (503 `service_unavailable`), `ProviderOutOfFunds` (402),
        `RateLimited`, `AuthFailed`, `Rejected` or `Refused` (another 4xx: nothing was made;
        `refusals` tells which), and `OutcomeUnknown` for a 5xx or a success without an id
        (it may have been made).

        The spec's error table (verda.md §6) maps 400 to `invalid_request`, which quota
        refusals share (verda.md §5), and 403 to `forbidden_action`, "Can't perform the
        current action": on a create, neither is our credentials, so both go to `refusals`."""
        status = response.status_code
        if response.is_success:
            made_id = parse.created_id(response.text)
            if made_id is None:
                raise OutcomeUnknown(
                    PROVIDER,
                    f"{where}: answered {status} without the id of {what}",
                    status_code=status,
                )
            return made_id
        answer = parse.json_or_none(response.text)
        code = error_field(answer, "code")
        if status == 503 and code == "service_unavailable":
            raise NoCapacity(PROVIDER, f"{where}: no capacity", status_code=status)
        if status == 402:
            raise ProviderOutOfFunds(PROVIDER, f"{where}: {code}", status_code=status)
        if not (status == 403 and code == "forbidden_action"):
            self.http.raise_common(response, is_create=True)
        if 400 <= status < 500:
            raise create_refusal(
                PROVIDER,
                where=where,
                status=status,
                code=code,
                said=error_field(answer, "message"),
                sent=sent_fields(response.request),
                input_codes=("invalid_request",),
            )
        raise OutcomeUnknown(PROVIDER, f"{where}: answered {status}", status_code=status)

    async def instance(self, vm_id: str) -> Any | None:
        """`GET /instances/{id}`; None when Verda does not know the id."""
        if not parse.is_id(vm_id):
            return None
        response = await self.request("GET", f"/instances/{quote(vm_id, safe='')}")
        if response.status_code in (400, 404):
            return None  # "Invalid instance id"
        return self.read(response)

    async def instances(self, tag: str) -> Any:
        """`GET /instances?tag=...`: instances with this tag key (`key`) or key and value."""
        return self.read(await self.request("GET", "/instances", params=[("tag", tag)]))

    async def delete_instance(self, vm_id: str, volume_ids: list[str]) -> None:
        """Delete an instance and `volume_ids` (its OS volume and any other) for good: without
        `volume_ids` Verda moves the OS volume to its 96-hour trash, where it counts against
        the storage quota, and `delete_permanently` does nothing (its document, the SDK's
        docstring). An instance already gone is fine.

        Raises `DeleteRefused` when Verda refuses, which it also does while one still boots.
        """
        if not parse.is_id(vm_id):
            return
        body: dict[str, Any] = {"action": "delete", "id": [vm_id], "delete_permanently": True}
        if volume_ids:
            body["volume_ids"] = volume_ids
        response = await self.request("PUT", "/instances", json=body)
        status = response.status_code
        if status in (204, 404):
            return
        self.raise_refusal(response, f"delete of {vm_id}")
        results = self.read(response)
        for item in results if isinstance(results, list) else []:
            if not isinstance(item, dict) or item.get("instanceId") != vm_id:
                continue
            if item.get("status") == "error" and item.get("statusCode") != 404:
                code = item.get("statusCode")
                raise DeleteRefused(
                    PROVIDER,
                    f"delete of {vm_id} refused",
                    status_code=code if isinstance(code, int) else None,
                )

    def raise_refusal(self, response: httpx.Response, what: str) -> None:
        """`DeleteRefused` for an action Verda refused: any 400, or `forbidden_action`, the code
        of both known delete refusals ("Can't discontinue a provisioning instance", "... a
        discontinued instance"), which its error table answers with 403 (verda.md §6). Any
        other 403 is about our credentials, and `read` says so."""
        status = response.status_code
        code = error_field(parse.json_or_none(response.text), "code")
        if status == 400 or (status == 403 and code == "forbidden_action"):
            raise DeleteRefused(PROVIDER, f"{what} refused ({code or status})", status_code=status)

    async def volumes(self) -> Any:
        """`GET /volumes`: every volume that is not in the trash."""
        return self.read(await self.request("GET", "/volumes"))

    async def trashed_volumes(self) -> Any:
        """`GET /volumes/trash`: the volumes deleted, not yet for good."""
        return self.read(await self.request("GET", "/volumes/trash"))

    async def volume(self, volume_id: str) -> Any | None:
        """`GET /volumes/{id}`; None once Verda does not know it (deleted for good)."""
        if not parse.is_id(volume_id):
            return None
        response = await self.request("GET", f"/volumes/{quote(volume_id, safe='')}")
        if response.status_code in (400, 404):
            return None
        return self.read(response)

    async def delete_volume(self, volume_id: str) -> None:
        """`DELETE /volumes/{id}` for good (`is_permanent`); one already gone is fine.

        Raises `DeleteRefused` when Verda refuses (a volume still attached)."""
        if not parse.is_id(volume_id):
            return
        response = await self.request(
            "DELETE", f"/volumes/{quote(volume_id, safe='')}", json={"is_permanent": True}
        )
        if response.status_code == 404:
            return
        self.raise_refusal(response, f"delete of volume {volume_id}")
        if not response.is_success:
            self.read(response)

    async def ssh_keys(self) -> Any:
        """`GET /ssh-keys`."""
        return self.read(await self.request("GET", "/ssh-keys"))

    async def add_ssh_key(self, name: str, public_key: str) -> str:
        """`POST /ssh-keys`; the new key's id."""
        response = await self.request("POST", "/ssh-keys", json={"name": name, "key": public_key})
        if not response.is_success:
            self.read(response)
        key_id = parse.created_id(response.text)
        if key_id is None:
            raise Unavailable(PROVIDER, "SSH key registered without an id in the answer")
        return key_id

    async def images(self, instance_type: str | None = None) -> Any:
        """`GET /images`: the OS images an instance can boot (of one type, when given)."""
        params = None if instance_type is None else {"instance_type": instance_type}
        return self.read(await self.request("GET", "/images", params=params))

    async def balance(self) -> Any:
        """`GET /balance`."""
        return self.read(await self.request("GET", "/balance"))

    def read(self, response: httpx.Response) -> Any:
        """The JSON of a successful answer; a typed outcome for any other."""
        if response.is_success:
            return self.http.json(response)
        self.http.raise_common(response)
        code = error_field(parse.json_or_none(response.text), "code")
        raise Rejected(
            PROVIDER,
            f"{response.request.method} {response.request.url.path}: "
            f"{response.status_code} {code or ''}".rstrip(),
            status_code=response.status_code,
        )

    # --- authentication --------------------------------------------------------------------

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
        """A usable access token. The cached one is used at once while it is good, even past its
        refresh point: its successor is fetched in the background, so no request (a create
        least of all) waits for a token fetch unless there is no usable token at all."""
        now = self._clock()
        if self._access is not None and now < self._expires_at - EXPIRY_SAFETY:
            if now >= self._refresh_at and (self._refreshing is None or self._refreshing.done()):
                self._refreshing = asyncio.create_task(self._refresh_ahead(), name="verda token")
            return self._access
        async with self._lock:
            if self._access is None or self._clock() >= self._expires_at - EXPIRY_SAFETY:
                return await self._authenticate()
            return self._access

    async def _refresh_ahead(self) -> None:
        async with self._lock:
            if self._access is None or self._clock() < self._refresh_at:
                return  # done meanwhile, or forgotten: the next request fetches one
            try:
                await self._authenticate()
            except ProviderError as exc:  # the current token is still good until it expires
                logger.warning("verda: refreshing the token ahead of expiry failed: %s", exc)

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
            code = error_field(parse.json_or_none(response.text), "code")
            raise AuthFailed(
                PROVIDER,
                f"token request refused ({code or response.status_code})",
                status_code=response.status_code,
            )
        self.http.raise_common(response)
        if not response.is_success:
            raise Rejected(
                PROVIDER,
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
            raise Unavailable(PROVIDER, "token response is missing its fields")
        self._access = access
        self._refresh = refresh if isinstance(refresh, str) and refresh else None
        now, lifetime = self._clock(), float(expires_in)
        self._expires_at = now + lifetime
        self._refresh_at = self._expires_at - min(REFRESH_MARGIN, lifetime / 2)
        return access
