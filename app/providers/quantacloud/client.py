"""QuantaCloud's REST API on the wire: the `X-API-Key` header, its error envelope, its paging.

Errors come as `{"error": {"code", "message", ...}}`; outcomes are keyed on the status and that
code, never on the message.
"""

from typing import Any
from urllib.parse import quote

import httpx
from pydantic import SecretStr

from app.providers.base import NoCapacity, ProviderOutOfFunds, Refused, Rejected, Unavailable
from app.providers.http import ProviderHTTP, error_field, retry_after, wire_decimal
from app.providers.quantacloud import facts
from app.providers.quantacloud.parse import PROVIDER
from app.providers.refusals import create_refusal, sent_fields

MAX_PAGES = 100
# Keyed on the code at any status: `offer_unavailable`'s status is seen in one fixture only.
CAPACITY_CODES = (facts.OFFER_UNAVAILABLE.code, facts.OFFER_COOLING_DOWN.code)


class DeploymentNotFound(Rejected):
    """404: the deployment (or offer) does not exist, or no longer does."""


class QuantaCloudClient:
    """One method per kind of call; every failure becomes a typed outcome from `base`."""

    def __init__(self, http: ProviderHTTP, api_key: SecretStr) -> None:
        self._http = http
        self._api_key = api_key

    def __repr__(self) -> str:
        return f"QuantaCloudClient(base_url={self._http.base_url!r})"

    # --- the calls -------------------------------------------------------------------------

    async def offers(self, *, page_size: int) -> list[Any]:
        """`GET /offers` (public), every page: the rows."""
        return await self.collect(facts.OFFERS, facts.OFFER_ROWS, public=True, size=page_size)

    async def deploy(self, body: dict[str, Any]) -> Any:
        """`POST /deployments`: the new deployment."""
        return await self.call("POST", facts.DEPLOYMENTS, is_create=True, json=body)

    async def deployment(self, vm_id: str) -> Any | None:
        """`GET /deployments/{id}`; None when QuantaCloud says it does not exist."""
        try:
            return await self.call("GET", facts.DEPLOYMENT.format(deployment_id=_quoted(vm_id)))
        except DeploymentNotFound:
            return None

    async def deployments(self, *, page_size: int) -> list[Any]:
        """`GET /deployments`, every page: the rows."""
        return await self.collect(
            facts.DEPLOYMENTS, facts.DEPLOYMENT_ROWS, public=False, size=page_size
        )

    async def stop(self, vm_id: str) -> None:
        """`POST /deployments/{id}/stop` (= terminate); `DeploymentNotFound` if there is none."""
        path = facts.STOP.format(deployment_id=_quoted(vm_id))
        await self.call("POST", path, want_body=False)

    async def balance(self) -> Any:
        """`GET /account/balance`."""
        return await self.call("GET", facts.BALANCE)

    async def ssh_keys(self) -> Any:
        """`GET /users/me/ssh-keys`."""
        return await self.call("GET", facts.SSH_KEYS)

    async def add_ssh_key(self, name: str, public_key: str) -> Any:
        """`POST /users/me/ssh-keys`: the new key."""
        body = {facts.KEY_NAME: name, facts.KEY_PUBLIC: public_key}
        return await self.call("POST", facts.SSH_KEYS, json=body)

    # --- transport -------------------------------------------------------------------------

    async def call(
        self,
        method: str,
        path: str,
        *,
        public: bool = False,
        is_create: bool = False,
        json: Any = None,
        params: dict[str, Any] | None = None,
        want_body: bool = True,
    ) -> Any:
        """Send one request and return its JSON body; every failure raises a typed outcome."""
        headers = {"Accept": "application/json"}
        if not public:
            headers[facts.API_KEY_HEADER] = self._api_key.get_secret_value()
        response = await self._http.send(
            method, path, is_create=is_create, json=json, params=params, headers=headers
        )
        self.check(response, is_create=is_create)
        if not want_body:
            return None
        return self._http.json(response, is_create=is_create)

    def check(self, response: httpx.Response, *, is_create: bool) -> None:
        """Raise the typed outcome for an error response; return for a 2xx/3xx."""
        status = response.status_code
        if status < 400:
            return
        try:
            body = response.json()
        except ValueError:
            body = None
        code = error_field(body, facts.ERROR, "code")
        where = f"{response.request.method} {response.request.url.path}"
        summary = f"{where}: {status} {code or 'error'}"
        message = error_field(body, facts.ERROR, "message")
        if message:
            summary += f": {message[:200]}"
        # Capacity codes first: a 503 offer_cooling_down means "not created", not "unknown".
        if code in CAPACITY_CODES:
            wait = seconds(_error_value(body, facts.RETRY_AFTER))
            raise NoCapacity(
                PROVIDER,
                summary,
                status_code=status,
                retry_after=wait if wait is not None else retry_after(response),
            )
        if status == facts.INSUFFICIENT_BALANCE.status or code == facts.INSUFFICIENT_BALANCE.code:
            raise ProviderOutOfFunds(PROVIDER, summary, status_code=status)
        self._http.raise_common(response, is_create=is_create)
        if is_create:
            raise self._create_refusal(response, code, message)
        if status == facts.NOT_FOUND.status:
            raise DeploymentNotFound(PROVIDER, summary, status_code=status)
        raise Rejected(PROVIDER, summary, status_code=status)

    @staticmethod
    def _create_refusal(
        response: httpx.Response, code: str | None, message: str | None
    ) -> Rejected | Refused:
        """A create refusal that is not capacity, money, credentials or rate (`refusals`). The
        only source, second-hand (`facts`), names `validation_error` and `provider_not_found`
        as input errors; the latter's code itself names our `provider` field, so it names the
        request itself whatever its message says."""
        return create_refusal(
            PROVIDER,
            where=f"{response.request.method} {response.request.url.path}",
            status=response.status_code,
            code=code,
            said=message,
            sent=sent_fields(response.request),
            input_codes=(facts.VALIDATION_ERROR.code,),
            code_names={facts.PROVIDER_NOT_FOUND.code: facts.PROVIDER_FIELD},
        )

    async def collect(self, path: str, rows_key: str, *, public: bool, size: int) -> list[Any]:
        """Every row of a paged list (`page` from 0, `size`), until `hasMore` is false or a page
        comes short."""
        rows: list[Any] = []
        for page in range(MAX_PAGES):
            params = {facts.PAGE: page, facts.SIZE: size}
            body = await self.call("GET", path, public=public, params=params)
            chunk = body.get(rows_key) if isinstance(body, dict) else None
            if not isinstance(chunk, list):
                raise Unavailable(PROVIDER, f"GET {path}: no list under {rows_key!r}")
            rows.extend(chunk)
            more = body.get(facts.HAS_MORE)
            if not chunk or more is False or (not isinstance(more, bool) and len(chunk) < size):
                return rows
        raise Unavailable(PROVIDER, f"GET {path}: more than {MAX_PAGES} pages")


def _quoted(vm_id: str) -> str:
    return quote(vm_id, safe="")


def _error_value(body: Any, key: str) -> Any:
    error = body.get(facts.ERROR) if isinstance(body, dict) else None
    return error.get(key) if isinstance(error, dict) else None


def seconds(value: Any) -> float | None:
    """A non-negative number of seconds from the wire, or None."""
    amount = wire_decimal(value)
    return None if amount is None or amount < 0 else float(amount)
