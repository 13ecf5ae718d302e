"""The Verda adapter: offers from instance types x availability, VMs from `/v1/instances`."""

import hashlib
import json
import logging
import re
import time
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import SecretStr

from app.catalogue import Provider
from app.providers.base import (
    VM,
    NoCapacity,
    Offer,
    OutcomeUnknown,
    ProviderOutOfFunds,
    Rejected,
    Unavailable,
    VMState,
)
from app.providers.http import error_field, wire_decimal
from app.providers.verda import mapping
from app.providers.verda.client import VerdaAPI

logger = logging.getLogger(__name__)

PRICE_MAX_AGE = 600.0  # seconds; prices change rarely, stock every poll
UNKNOWN_TYPE_RECHECK = 60.0  # a type in stock but not in the price list: re-read at most this often
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{7,127}$")


class VerdaAdapter:
    """Verda (formerly DataCrunch) behind the `ProviderAdapter` interface."""

    provider = Provider.VERDA

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str,
        client_id: SecretStr,
        client_secret: SecretStr,
        image: str,
        timeout: float = 10.0,
        create_timeout: float = 30.0,
    ) -> None:
        self._api = VerdaAPI(
            client,
            base_url=base_url,
            client_id=client_id,
            client_secret=client_secret,
            timeout=timeout,
            create_timeout=create_timeout,
        )
        self._image = image
        self._types: dict[str, dict[str, Any]] = {}
        self._types_at: float | None = None

    def __repr__(self) -> str:
        return f"VerdaAdapter(base_url={self._api.http.base_url!r}, image={self._image!r})"

    # --- offers ----------------------------------------------------------------------------

    async def refresh_prices(self) -> dict[str, dict[str, Any]]:
        """Read `/instance-types` (public, prices as decimal strings) now and cache it."""
        response = await self._api.public("/instance-types", params={"currency": "usd"})
        body = self._read(response)
        if not isinstance(body, list):
            raise Unavailable(self.provider, "/instance-types did not answer a list")
        self._types = {
            t["instance_type"]: t
            for t in body
            if isinstance(t, dict) and isinstance(t.get("instance_type"), str)
        }
        self._types_at = time.monotonic()
        return self._types

    async def fetch_offers(self) -> list[Offer]:
        """On-demand stock now (`/instance-availability`) priced from the cached types."""
        types = await self.refresh_prices() if self._age() > PRICE_MAX_AGE else self._types
        response = await self._api.request(
            "GET", "/instance-availability", params={"is_spot": "false"}
        )
        body = self._read(response)
        if not isinstance(body, list):
            raise Unavailable(self.provider, "/instance-availability did not answer a list")
        pairs = [
            (sku, loc["location_code"])
            for loc in body
            if isinstance(loc, dict) and isinstance(loc.get("location_code"), str)
            for sku in _list(loc.get("availabilities"))
            if isinstance(sku, str)
        ]
        missing = any(sku not in types for sku, _ in pairs)
        if missing and self._age() > UNKNOWN_TYPE_RECHECK:
            types = await self.refresh_prices()  # a type newer than our price list
        offers = []
        for sku, region in pairs:
            data = types.get(sku)
            made = mapping.offer(data, region) if data is not None else None
            if made is None:
                logger.debug("verda: no offer for %s in %s", sku, region)
                continue
            offers.append(made)
        return offers

    def _age(self) -> float:
        return float("inf") if self._types_at is None else time.monotonic() - self._types_at

    # --- VMs -------------------------------------------------------------------------------

    async def create_vm(
        self,
        offer: Offer,
        *,
        name: str,
        tag: str,
        ssh_public_key: str | None,
        disk_gb: int | None = None,
    ) -> VM:
        """`POST /v1/instances`; Verda answers 202 with the bare instance id."""
        body: dict[str, Any] = {
            "instance_type": offer.sku,
            "image": self._image,
            "hostname": name,
            "description": f"autoprovision {tag}",
            "location_code": offer.region,
            "is_spot": False,
            "tags": [{"key": mapping.TAG_KEY, "value": tag}],
        }
        if disk_gb is not None and not offer.disk_fixed:
            body["os_volume"] = {"name": f"{name}-os", "size": disk_gb}
        if ssh_public_key:
            body["ssh_key_ids"] = [await self._ssh_key_id(ssh_public_key)]
        response = await self._api.request("POST", "/instances", is_create=True, json=body)
        where = f"create {offer.sku} in {offer.region}"
        if response.is_success:
            vm_id = _created_id(response.text)
            if vm_id is None:
                raise OutcomeUnknown(
                    self.provider,
                    f"{where}: answered {response.status_code} without an instance id",
                    status_code=response.status_code,
                )
            return VM(
                provider=self.provider,
                id=vm_id,
                state=VMState.PENDING,
                provider_status="ordered",
                name=name,
                region=offer.region,
                sku=offer.sku,
                tags=(tag,),
            )
        status = response.status_code
        code = error_field(_json_or_none(response), "code")
        if status == 503 and code == "service_unavailable":
            raise NoCapacity(self.provider, f"{where}: no capacity", status_code=status)
        if status == 402:
            raise ProviderOutOfFunds(self.provider, f"{where}: {code}", status_code=status)
        self._api.http.raise_common(response, is_create=True)
        if 400 <= status < 500:
            raise Rejected(self.provider, f"{where}: refused ({code})", status_code=status)
        raise OutcomeUnknown(self.provider, f"{where}: answered {status}", status_code=status)

    async def get_vm(self, vm_id: str) -> VM | None:
        """`GET /v1/instances/{id}`; None when Verda does not know the id."""
        if not _ID.match(vm_id):
            return None
        response = await self._api.request("GET", f"/instances/{quote(vm_id, safe='')}")
        if response.status_code in (400, 404):
            return None  # "Invalid instance id"
        found = mapping.vm(self._read(response))
        if found is None:
            raise Unavailable(self.provider, f"instance {vm_id}: answer without an id")
        return found

    async def find_vms(
        self, *, name: str, tag: str, offer: Offer, not_before: datetime
    ) -> list[VM]:
        """Instances carrying our tag (exact match on Verda's side) and our hostname."""
        response = await self._api.request(
            "GET", "/instances", params=[("tag", f"{mapping.TAG_KEY}={tag}")]
        )
        body = self._read(response)
        if not isinstance(body, list):
            raise Unavailable(self.provider, "/instances did not answer a list")
        found = [mapping.vm(item) for item in body]
        return [v for v in found if v is not None and v.name == name and tag in v.tags]

    async def list_vms(self) -> list[VM]:
        """Every instance carrying our tag key, whatever its value."""
        response = await self._api.request("GET", "/instances", params=[("tag", mapping.TAG_KEY)])
        body = self._read(response)
        if not isinstance(body, list):
            raise Unavailable(self.provider, "/instances did not answer a list")
        return [v for v in (mapping.vm(item) for item in body) if v is not None]

    async def delete_vm(self, vm_id: str) -> None:
        """Delete for good (OS volume too); gone already is fine, still booting is retry-later."""
        if not _ID.match(vm_id):
            return
        response = await self._api.request(
            "PUT",
            "/instances",
            json={"action": "delete", "id": [vm_id], "delete_permanently": True},
        )
        status = response.status_code
        if status in (204, 404):
            return
        if status == 400:
            await self._after_refusal(vm_id, status)
            return
        body = self._read(response)
        items = body if isinstance(body, list) else []
        for item in items:
            if not isinstance(item, dict) or item.get("instanceId") != vm_id:
                continue
            if item.get("status") == "error" and item.get("statusCode") != 404:
                await self._after_refusal(vm_id, item.get("statusCode"))

    async def _after_refusal(self, vm_id: str, status: Any) -> None:
        """Verda refused a delete: find out why from the instance, not the message."""
        current = await self.get_vm(vm_id)
        if current is None or current.state in (VMState.GONE, VMState.DELETING):
            return
        if current.state is VMState.PENDING:
            raise Unavailable(
                self.provider, f"instance {vm_id} is still {current.provider_status}: delete later"
            )
        raise Rejected(
            self.provider,
            f"delete of instance {vm_id} ({current.provider_status}) refused",
            status_code=status if isinstance(status, int) else None,
        )

    # --- account ---------------------------------------------------------------------------

    async def balance(self) -> Decimal:
        """`GET /v1/balance`: the amount in the project's billing currency."""
        body = self._read(await self._api.request("GET", "/balance"))
        amount = wire_decimal(body.get("amount") if isinstance(body, dict) else None)
        if amount is None:
            raise Unavailable(self.provider, "/balance answered without an amount")
        if isinstance(body, dict) and str(body.get("currency", "usd")).lower() != "usd":
            logger.warning("verda: the balance is in %s, not usd", body.get("currency"))
        return amount

    # --- helpers ---------------------------------------------------------------------------

    async def _ssh_key_id(self, public_key: str) -> str:
        """The id of this public key at Verda, registering it first if it is not there yet."""
        wanted = " ".join(public_key.split()[:2])  # type and key; the comment may differ
        keys = self._read(await self._api.request("GET", "/ssh-keys"))
        for key in keys if isinstance(keys, list) else []:
            if (
                isinstance(key, dict)
                and isinstance(key.get("id"), str)
                and " ".join(str(key.get("key", "")).split()[:2]) == wanted
            ):
                return str(key["id"])
        digest = hashlib.sha256(wanted.encode()).hexdigest()[:12]
        response = await self._api.request(
            "POST", "/ssh-keys", json={"name": f"autoprovision-{digest}", "key": public_key.strip()}
        )
        if not response.is_success:
            self._read(response)
        key_id = _created_id(response.text)
        if key_id is None:
            raise Unavailable(self.provider, "SSH key registered without an id in the answer")
        return key_id

    def _read(self, response: httpx.Response) -> Any:
        """The JSON of a successful answer; a typed outcome for any other."""
        if response.is_success:
            return self._api.http.json(response)
        self._api.http.raise_common(response)
        code = error_field(_json_or_none(response), "code")
        raise Rejected(
            self.provider,
            f"{response.request.method} {response.request.url.path}: "
            f"{response.status_code} {code or ''}".rstrip(),
            status_code=response.status_code,
        )


def _created_id(text: str) -> str | None:
    """The id in a create answer: bare text, maybe quoted, maybe `{"id": ...}`."""
    value = text.strip().strip('"').strip()
    if _ID.match(value):
        return value
    body = _json_or_none_text(text)
    candidate = body.get("id") if isinstance(body, dict) else None
    return candidate if isinstance(candidate, str) and _ID.match(candidate) else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _json_or_none(response: httpx.Response) -> Any:
    return _json_or_none_text(response.text)


def _json_or_none_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
