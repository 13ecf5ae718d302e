"""Hyperstack's Infrahub API over HTTP: the `api_key` header, one method per call, and every
failure as a typed outcome of `providers.base`.

Errors are keyed on the status and the envelope's `error_reason`, never its `message` (which is
only quoted, for people).
"""

import logging
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import SecretStr

from app.core.text import quote
from app.providers.base import (
    NoCapacity,
    OutcomeUnknown,
    ProviderError,
    ProviderOutOfFunds,
    Refused,
    Rejected,
    Unavailable,
)
from app.providers.http import Connections, ProviderHTTP, error_field
from app.providers.hyperstack import limits, parse
from app.providers.hyperstack.parse import PROVIDER
from app.providers.refusals import MESSAGE_QUOTE, create_refusal

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Answer:
    """One Hyperstack response that was not a 401/403/429/5xx: its status and JSON body."""

    status: int
    body: Any
    where: str

    @property
    def ok(self) -> bool:
        """Whether the status is 2xx and the envelope does not say otherwise."""
        return 200 <= self.status < 300 and not self.said_no

    @property
    def said_no(self) -> bool:
        """A 2xx whose envelope says `status: false` (hyperstack.md §1): not a success, and
        nothing says what became of the call."""
        return (
            200 <= self.status < 300
            and isinstance(self.body, dict)
            and self.body.get("status") is False
        )

    @property
    def reason(self) -> str | None:
        """The error envelope's `error_reason` (some errors omit it)."""
        return error_field(self.body, "error_reason")

    @property
    def message(self) -> str:
        """The envelope's `message`, for people (never for deciding anything)."""
        return error_field(self.body, "message") or f"HTTP {self.status}"


class NotFound(Refused):
    """A create answered 404: something it names by name (the environment, the key pair, the
    flavor, the image) was not found there; nothing was made."""


class HyperstackClient:
    """Sends requests to the Infrahub API with the key; the key never leaves this object."""

    def __init__(
        self,
        client: Connections,
        *,
        base_url: str,
        api_key: SecretStr,
        timeout: float,
        create_timeout: float,
    ) -> None:
        self.http = ProviderHTTP(
            PROVIDER,
            client,
            base_url,
            timeout=timeout,
            create_timeout=create_timeout,
            published=limits.PUBLISHED,
        )
        self._api_key = api_key

    def __repr__(self) -> str:
        return f"HyperstackClient(base_url={self.http.base_url!r})"

    # --- offers ----------------------------------------------------------------------------

    async def pricebook(self) -> Any:
        """`GET /pricebook`."""
        return await self._read("/pricebook")

    async def flavors(self) -> Any:
        """`GET /core/flavors`."""
        return await self._read("/core/flavors")

    async def stocks(self) -> Any | None:
        """`GET /core/stocks`; None when Hyperstack has no counts ("Stocks Not Found", 404)."""
        answer = await self._call("GET", "/core/stocks")
        if answer.status == 404:
            return None
        if not answer.ok:
            raise self._unexpected(answer)
        return answer.body

    # --- what a create needs ---------------------------------------------------------------

    async def images(self, region: str | None = None) -> Any:
        """`GET /core/images[?region=]` (without a region: every region's)."""
        return await self._read("/core/images", {"region": region} if region else None)

    async def environments(self, search: str) -> Any:
        """`GET /core/environments?search=`."""
        return await self._read("/core/environments", {"search": search})

    async def create_environment(self, name: str, region: str) -> bool:
        """`POST /core/environments`; False when one of that name exists already (409)."""
        answer = await self._call(
            "POST", "/core/environments", json={"name": name, "region": region}
        )
        if answer.said_no:
            raise self._unexpected(answer)  # no VM was asked for: the next attempt looks again
        if answer.status == 409:
            return False
        if not answer.ok:
            raise Rejected(
                PROVIDER,
                f"cannot create environment {name}: {quote(answer.message)}",
                status_code=answer.status,
            )
        return True

    async def keypairs(self, search: str) -> Any:
        """`GET /core/keypairs?search=`."""
        return await self._read("/core/keypairs", {"search": search})

    async def import_keypair(self, name: str, environment: str, public_key: str) -> None:
        """`POST /core/keypairs`; one of that name in the environment already is fine (409)."""
        answer = await self._call(
            "POST",
            "/core/keypairs",
            json={"name": name, "environment_name": environment, "public_key": public_key},
        )
        if answer.said_no:
            raise self._unexpected(answer)
        if not answer.ok and answer.status != 409:
            raise Rejected(
                PROVIDER,
                f"key pair {name} refused in {environment}: {quote(answer.message)}",
                status_code=answer.status,
            )

    # --- VMs -------------------------------------------------------------------------------

    async def create_vm(
        self, payload: dict[str, Any], *, region: str, price_per_hour: Decimal
    ) -> Any:
        """`POST /core/virtual-machines`; the answer's body.

        Capacity is a 409 `conflict` (our simulator's guess: no source shows the real one);
        money is a 400 with no code of its own, told apart by the account's credit (never the
        message). Any other refusal is `Rejected` only when it names a field of our body
        (`refusals`), else `Refused`: hyperstack.md §4 knows 400, 404, 405 and 409 on create,
        and for 409 only `already_exist`.
        """
        sku = payload.get("flavor_name")
        answer = await self._call("POST", "/core/virtual-machines", json=payload, is_create=True)
        if answer.ok:
            return answer.body
        if answer.said_no:  # something may have been made: look it up by name, as after a 5xx
            raise OutcomeUnknown(
                PROVIDER,
                f"create of {sku} in {region} answered {answer.status} with status false: "
                f"{quote(answer.message, MESSAGE_QUOTE)}",
                status_code=answer.status,
            )
        if answer.status == 409 and answer.reason in (None, "conflict"):
            raise NoCapacity(
                PROVIDER, f"{sku} in {region}: {quote(answer.message)}", status_code=answer.status
            )
        if (
            answer.status == 400
            and answer.reason in (None, "bad_request")
            and await self._cannot_pay(price_per_hour)
        ):
            raise ProviderOutOfFunds(
                PROVIDER, f"create of {sku}: {quote(answer.message)}", status_code=answer.status
            )
        if answer.status == 404:  # names no field: the environment, key pair, flavor or image
            raise NotFound(
                PROVIDER,
                f"create of {sku} in {region}: 404 {quote(answer.message, MESSAGE_QUOTE)}",
                status_code=answer.status,
                reason=answer.reason,
                said=error_field(answer.body, "message"),
            )
        raise create_refusal(
            PROVIDER,
            where=f"create of {sku} in {region}",
            status=answer.status,
            code=answer.reason,
            said=error_field(answer.body, "message"),
            sent=payload.keys(),
            input_codes=("bad_request",),  # the docs' 400 slug (hyperstack.md §1)
        )

    async def _cannot_pay(self, price_per_hour: Decimal) -> bool:
        try:
            body = await self.credit()
        except ProviderError:
            log.warning("hyperstack: create got 400 and the credit could not be read")
            return True  # a money problem waits for the next offer; Rejected would end the order
        return parse.cannot_pay(body, price_per_hour)

    async def vm(self, vm_id: str) -> Any | None:
        """`GET /core/virtual-machines/{id}`; None once Hyperstack answers 404 (ids are
        integers: others never exist)."""
        if not vm_id.isdigit():
            return None
        answer = await self._call("GET", f"/core/virtual-machines/{vm_id}")
        if answer.status == 404:
            return None
        if not answer.ok:
            raise self._unexpected(answer)
        return answer.body

    async def vms(self, *, page: int, page_size: int, search: str | None = None) -> Any:
        """`GET /core/virtual-machines`, one page (from 1)."""
        params: dict[str, Any] = {"page": page, "pageSize": page_size}
        if search is not None:
            params = {"search": search, **params}
        return await self._read("/core/virtual-machines", params)

    async def delete_vm(self, vm_id: str) -> None:
        """`DELETE /core/virtual-machines/{id}`; a VM already gone (404) is fine."""
        if not vm_id.isdigit():
            return
        answer = await self._call("DELETE", f"/core/virtual-machines/{vm_id}")
        if answer.ok or answer.status == 404:
            return
        if answer.said_no:  # not taken: the terminator sends it again
            raise self._unexpected(answer)
        raise Rejected(
            PROVIDER,
            f"delete of VM {vm_id} refused: {answer.message}",
            status_code=answer.status,
        )

    async def credit(self) -> Any:
        """`GET /billing/user-credit/credit`."""
        return await self._read("/billing/user-credit/credit")

    # --- transport -------------------------------------------------------------------------

    async def _call(
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

    async def _read(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """The body of a GET that must succeed: any other answer is `Unavailable`."""
        answer = await self._call("GET", path, params=params)
        if not answer.ok:
            raise self._unexpected(answer)
        return answer.body

    @staticmethod
    def _unexpected(answer: Answer) -> Unavailable:
        said = " with status false" if answer.said_no else ""
        return Unavailable(
            PROVIDER,
            f"{answer.where} answered {answer.status}{said}: "
            f"{quote(answer.message, MESSAGE_QUOTE)}",
            status_code=answer.status,
        )
