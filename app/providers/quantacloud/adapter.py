"""The QuantaCloud adapter: in-stock offers with ephemeral ids, deployments without names.

QuantaCloud deployments carry no name, label or tag, so a create's returned id is the only
handle on its VM; after a lost answer, `find_vms` lists deployments of the offer's kind created
since the intent and the caller adopts the one it cannot otherwise account for.
"""

import base64
import binascii
import hashlib
import logging
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import SecretStr

from app.catalogue import Interconnect, Provider, normalize_gpu_model
from app.providers.base import (
    PROVIDER_CLOCK_SKEW,
    VM,
    Offer,
    OutcomeUnknown,
    Rejected,
    Unavailable,
    VMState,
)
from app.providers.http import ProviderHTTP, wire_decimal
from app.providers.quantacloud.client import DeploymentNotFound, QuantaCloudClient

logger = logging.getLogger(__name__)

PROVIDER_SLUG = "quantacloud"
MIG_MARKER = "-mig-"  # a MIG slice is a partition of a GPU and must never sell as the whole GPU
GPU_SLUGS = {
    "b300-sxm": "B300",
    "b200-sxm": "B200",
    "gb300": "GB300",
    "gb200": "GB200",
    "gh200": "GH200",
    "h200-sxm": "H200",
    "h200-nvl": "H200",
    "h100-sxm": "H100",
    "h100-pcie": "H100",
    "h100-nvl": "H100",
    "a100-80gb-sxm": "A100-80G",
    "a100-80gb-pcie": "A100-80G",
    "a100-40gb-sxm": "A100-40G",
    "a100-40gb-pcie": "A100-40G",
    "rtx-pro-6000-blackwell": "RTX-PRO-6000",
    "rtx-6000-ada": "RTX-6000-ADA",
}
VM_STATES = {
    "provisioning": VMState.PENDING,
    "connecting": VMState.PENDING,
    "active": VMState.RUNNING,
    "failed": VMState.FAILED,
    "interrupted": VMState.FAILED,
    "stopping": VMState.DELETING,
    "terminated": VMState.GONE,
}
NOT_LIVE = (VMState.GONE, VMState.FAILED, VMState.DELETING)


class QuantaCloudAdapter:
    """QuantaCloud behind the `ProviderAdapter` interface."""

    provider = Provider.QUANTACLOUD
    page_size = 100

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str,
        api_key: SecretStr,
        timeout: float = 10.0,
        create_timeout: float = 30.0,
    ) -> None:
        http = ProviderHTTP(self.provider, client, base_url, timeout, create_timeout)
        self._api = QuantaCloudClient(http, api_key)
        self._base_url = base_url

    def __repr__(self) -> str:
        return f"QuantaCloudAdapter(base_url={self._base_url!r})"

    async def fetch_offers(self) -> list[Offer]:
        """In-stock offers, cheapest per (region, sku); MIG slices and unknown GPUs left out."""
        rows = await self._api.collect("/offers", "offers", public=True, size=self.page_size)
        offers: dict[tuple[str, str, str], Offer] = {}
        for row in rows:
            offer = parse_offer(row)
            if offer is not None and (
                offer.key not in offers or offer.price_per_hour < offers[offer.key].price_per_hour
            ):
                offers[offer.key] = offer
        return list(offers.values())

    async def create_vm(
        self,
        offer: Offer,
        *,
        name: str,
        tag: str,
        ssh_public_key: str | None,
        disk_gb: int | None = None,
    ) -> VM:
        """Deploy `offer` by its (ephemeral) id; QuantaCloud has no name or tag to set."""
        if not offer.offer_id:
            raise Rejected(self.provider, f"offer {offer.sku} in {offer.region} has no offer id")
        body: dict[str, Any] = {"provider": PROVIDER_SLUG, "offer_id": offer.offer_id}
        if ssh_public_key:
            body["ssh_key_ids"] = [await self._ssh_key_id(ssh_public_key)]
        created = await self._api.call("POST", "/deployments", is_create=True, json=body)
        vm_id = created.get("id") if isinstance(created, dict) else None
        if not isinstance(vm_id, str | int) or isinstance(vm_id, bool) or not str(vm_id):
            raise OutcomeUnknown(self.provider, "POST /deployments answered without an id")
        status = _status(created)
        return VM(
            provider=self.provider,
            id=str(vm_id),
            state=VM_STATES.get(status, VMState.UNKNOWN),
            provider_status=status,
            region=offer.region,
            sku=offer.sku,
            created_at=parse_time(created.get("createdAt")),
        )

    async def get_vm(self, vm_id: str) -> VM | None:
        """The deployment with this id, or None when QuantaCloud says it does not exist."""
        try:
            body = await self._api.call("GET", f"/deployments/{quote(vm_id, safe='')}")
        except DeploymentNotFound:
            return None
        if not isinstance(body, dict):
            raise Unavailable(self.provider, "GET /deployments/{id}: not an object")
        return parse_deployment(body)

    async def find_vms(
        self, *, name: str, tag: str, offer: Offer, not_before: datetime
    ) -> list[VM]:
        """Live deployments of this offer's kind created since `not_before` (less clock skew).

        Fields a deployment does not carry (time, GPU, region) do not exclude it: the caller
        drops the ids it already accounts for.
        """
        if not_before.tzinfo is None:
            not_before = not_before.replace(tzinfo=UTC)
        since = not_before - PROVIDER_CLOCK_SKEW
        slug = offer.sku.rpartition("-x")[0] or offer.sku
        rows = await self._api.collect("/deployments", "data", public=False, size=self.page_size)
        found = []
        for row in rows:
            vm = parse_deployment(row) if isinstance(row, dict) else None
            if vm is None or vm.state in NOT_LIVE:
                continue
            if vm.created_at is not None and vm.created_at < since:
                continue
            gpu = _obj(row.get("gpu"))
            if _differs(gpu.get("slug"), slug) or _differs(row.get("region"), offer.region):
                continue
            count = row.get("gpuCount")
            if isinstance(count, int) and not isinstance(count, bool) and count != offer.gpu_count:
                continue
            found.append(vm)
        return found

    async def list_vms(self) -> list[VM]:
        """Every live deployment on the account (QuantaCloud has no tags to tell ours apart)."""
        rows = await self._api.collect("/deployments", "data", public=False, size=self.page_size)
        vms = (parse_deployment(row) if isinstance(row, dict) else None for row in rows)
        return [vm for vm in vms if vm is not None and vm.state not in NOT_LIVE]

    async def delete_vm(self, vm_id: str) -> None:
        """Stop (= terminate) a deployment; one already stopping, gone or failed is fine."""
        path = f"/deployments/{quote(vm_id, safe='')}/stop"
        try:
            await self._api.call("POST", path, want_body=False)
        except DeploymentNotFound:
            return
        except Rejected as refused:
            # "cannot stop" comes as validation_error; trust the status, not the message.
            vm = await self.get_vm(vm_id)
            if vm is not None and vm.state not in NOT_LIVE:
                raise refused

    async def balance(self) -> Decimal:
        """Balance in USD (unverified shape: `balance` or `amount`, number or string)."""
        body = await self._api.call("GET", "/account/balance")
        value = body
        if isinstance(body, dict):
            value = next((body[k] for k in ("balance", "amount", "available") if k in body), None)
            if isinstance(value, dict):
                value = value.get("amount", value.get("value"))
        amount = wire_decimal(value)
        if amount is None:
            raise Unavailable(self.provider, "GET /account/balance: no balance in the answer")
        return amount

    async def _ssh_key_id(self, public_key: str) -> str:
        """The id of this key on the account, registering it if it is not there yet."""
        fp = fingerprint(public_key)
        if fp is not None:
            keys = await self._api.call("GET", "/users/me/ssh-keys")
            for key in keys if isinstance(keys, list) else []:
                if (
                    isinstance(key, dict)
                    and _same_fingerprint(key.get("fingerprint"), fp)
                    and isinstance(key.get("id"), str | int)
                ):
                    return str(key["id"])
        label = hashlib.sha256(public_key.strip().encode()).hexdigest()[:12]
        created = await self._api.call(
            "POST",
            "/users/me/ssh-keys",
            json={"name": f"autoprovision-{label}", "publicKey": public_key.strip()},
        )
        key_id = created.get("id") if isinstance(created, dict) else None
        if not isinstance(key_id, str | int) or isinstance(key_id, bool):
            raise Unavailable(self.provider, "POST /users/me/ssh-keys answered without an id")
        return str(key_id)


def parse_offer(row: Any) -> Offer | None:
    """One `GET /offers` row as an Offer, or None if it cannot be deployed as whole GPUs."""
    if not isinstance(row, dict):
        return None
    gpu = _obj(row.get("gpu"))
    slug, count = gpu.get("slug"), row.get("gpuCount")
    if not isinstance(slug, str) or not slug:
        logger.debug("QuantaCloud offer without a GPU slug left out")
        return None
    gpu_model = None if MIG_MARKER in slug else gpu_model_for(slug)
    if gpu_model is None:
        logger.debug("QuantaCloud GPU %r is not in the catalogue (or a MIG slice): left out", slug)
        return None
    price = wire_decimal(row.get("priceHourly"))
    region, offer_id = row.get("region"), row.get("id")
    if (
        not isinstance(count, int)
        or isinstance(count, bool)
        or count < 1
        or price is None
        or price <= 0
        or not isinstance(region, str)
        or not isinstance(offer_id, str)
        or row.get("isAvailable") is False
    ):
        logger.debug("QuantaCloud offer for %r without a usable count/price/region/id", slug)
        return None
    specs = _obj(row.get("specs"))
    disk = _int(specs.get("disk"))
    return Offer(
        provider=Provider.QUANTACLOUD,
        region=region,
        sku=f"{slug}-x{count}",
        gpu_model=gpu_model,
        gpu_count=count,
        price_per_hour=price,
        interconnect=interconnect_for(slug, row),
        vcpus=_int(specs.get("vcpu")),
        ram_gb=_int(specs.get("ram")),
        disk_gb=disk if disk is not None else _int(row.get("storageMinGB")),
        disk_fixed=True,
        available=None,
        offer_id=offer_id,
    )


def gpu_model_for(slug: str) -> str | None:
    """The catalogue's GPU model for a QuantaCloud GPU slug, or None."""
    slug = slug.strip().lower()
    if slug in GPU_SLUGS:
        return GPU_SLUGS[slug]
    for suffix in ("-sxm", "-pcie", "-nvl"):
        slug = slug.removesuffix(suffix)
    return normalize_gpu_model(slug)


def interconnect_for(slug: str, row: dict[str, Any]) -> Interconnect | None:
    """SXM from the slug, else the `interconnect` field, else `nvlinkEnabled`."""
    if "-sxm" in slug:
        return Interconnect.SXM
    named = row.get("interconnect")
    if isinstance(named, str):
        for kind in (Interconnect.SXM, Interconnect.NVLINK, Interconnect.PCIE):
            if kind.value in named.lower():
                return kind
    nvlink = row.get("nvlinkEnabled")
    if isinstance(nvlink, bool):
        return Interconnect.NVLINK if nvlink else Interconnect.PCIE
    return None


def parse_deployment(row: dict[str, Any]) -> VM | None:
    """A deployment object as a VM; unknown statuses become UNKNOWN, never an error."""
    vm_id = row.get("id")
    if not isinstance(vm_id, str | int) or isinstance(vm_id, bool):
        return None
    status = _status(row)
    connection = _obj(row.get("connection"))
    ip = connection.get("public_ip")
    gpu = _obj(row.get("gpu"))
    slug, count, region = gpu.get("slug"), row.get("gpuCount"), row.get("region")
    return VM(
        provider=Provider.QUANTACLOUD,
        id=str(vm_id),
        state=VM_STATES.get(status, VMState.UNKNOWN),
        provider_status=status,
        region=region if isinstance(region, str) else None,
        sku=f"{slug}-x{count}" if isinstance(slug, str) and isinstance(count, int) else None,
        ip=ip if isinstance(ip, str) and ip else None,
        created_at=parse_time(row.get("createdAt")),
    )


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 string or Unix seconds/milliseconds as an aware datetime, or None."""
    try:
        if isinstance(value, str) and value:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            moment = datetime.fromtimestamp(value / 1000 if value > 1e11 else value, UTC)
        else:
            return None
    except (ValueError, OverflowError, OSError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def fingerprint(public_key: str) -> str | None:
    """The `SHA256:...` fingerprint of an OpenSSH public key line, or None if it is not one."""
    parts = public_key.strip().split()
    if len(parts) < 2:
        return None
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        return None
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _same_fingerprint(listed: Any, ours: str) -> bool:
    """Fingerprints compared without base64 padding (`ssh-keygen` drops it, others keep it)."""
    return isinstance(listed, str) and listed.strip().rstrip("=") == ours


def _status(body: dict[str, Any]) -> str:
    status = body.get("status")
    return status.strip().lower() if isinstance(status, str) else ""


def _differs(value: Any, expected: str) -> bool:
    """True only when the deployment names a value and it is not the expected one."""
    return isinstance(value, str) and value.strip().lower() != expected.lower()


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    amount = wire_decimal(value)
    return int(amount) if amount is not None and amount == amount.to_integral_value() else None
