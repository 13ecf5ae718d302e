"""The Hyperstack adapter: offers from flavors, stocks and the pricebook; VMs in per-region
environments, named and labelled so that a create with no answer can be found again."""

import asyncio
import hashlib
import logging
import time
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
from pydantic import SecretStr

from app.catalogue import Provider
from app.providers.base import (
    VM,
    NoCapacity,
    Offer,
    OutcomeUnknown,
    ProviderError,
    ProviderOutOfFunds,
    Rejected,
    Unavailable,
    VMState,
)
from app.providers.http import wire_decimal
from app.providers.hyperstack.client import Answer, HyperstackClient
from app.providers.hyperstack.offers import flavor_rows, parse_prices, parse_slots, to_offer

log = logging.getLogger(__name__)

PRICE_TTL = 600.0  # the pricebook changes rarely; stock is read on every poll
PAGE_SIZE = 100
MAX_PAGES = 20
STATES = {
    "CREATING": VMState.PENDING,
    "BUILD": VMState.PENDING,
    "ACTIVE": VMState.RUNNING,
    "ERROR": VMState.FAILED,
    "SHUTOFF": VMState.STOPPED,
    "HIBERNATED": VMState.STOPPED,
    "DELETING": VMState.DELETING,
    "DELETED": VMState.GONE,
}
SSH_RULE = {
    "direction": "ingress",
    "protocol": "tcp",
    "ethertype": "IPv4",
    "remote_ip_prefix": "0.0.0.0/0",
    "port_range_min": 22,
    "port_range_max": 22,
}


def keypair_name(public_key: str) -> str:
    """A stable key pair name for an SSH public key (its type and body, not its comment)."""
    material = " ".join(public_key.split()[:2])
    return "ap-" + hashlib.sha256(material.encode()).hexdigest()[:16]


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def to_vm(instance: Any) -> VM | None:
    """A Hyperstack `InstanceFields` object as a VM; None if it has no usable id."""
    if not isinstance(instance, dict):
        return None
    raw_id = instance.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, int | str) or not str(raw_id).isdigit():
        return None
    status = instance.get("status")
    status = status if isinstance(status, str) else ""
    environment, flavor = instance.get("environment"), instance.get("flavor")
    region = environment.get("region") if isinstance(environment, dict) else None
    sku = flavor.get("name") if isinstance(flavor, dict) else None
    ip, name, labels = instance.get("floating_ip"), instance.get("name"), instance.get("labels")
    return VM(
        provider=Provider.HYPERSTACK,
        id=str(raw_id),
        state=STATES.get(status.upper(), VMState.UNKNOWN),
        provider_status=status,
        name=name if isinstance(name, str) else None,
        region=region if isinstance(region, str) else None,
        sku=sku if isinstance(sku, str) else None,
        ip=ip if isinstance(ip, str) and ip else None,
        created_at=_timestamp(instance.get("created_at")),
        tags=tuple(t for t in labels if isinstance(t, str)) if isinstance(labels, list) else (),
    )


class HyperstackAdapter:
    """`ProviderAdapter` for Hyperstack's Infrahub API (`api_key` header)."""

    provider = Provider.HYPERSTACK

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str,
        api_key: SecretStr,
        environment: str,
        key_name: str,
        image: str,
        timeout: float = 10.0,
        create_timeout: float = 30.0,
    ) -> None:
        self._api = HyperstackClient(
            client,
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            create_timeout=create_timeout,
        )
        self.environment_template = environment
        self.key_name = key_name
        self.image = image
        self._prices: dict[str, Decimal] = {}
        self._prices_at: float | None = None
        self._environments: dict[str, str] = {}  # name -> region
        self._keypairs: set[tuple[str, str]] = set()

    def __repr__(self) -> str:
        return (
            f"HyperstackAdapter(base_url={self._api.http.base_url!r}, "
            f"environment={self.environment_template!r}, key_name={self.key_name!r})"
        )

    # --- offers ----------------------------------------------------------------------------

    async def refresh_prices(self) -> dict[str, Decimal]:
        """Read the pricebook now (fetch_offers does it by itself every 10 minutes)."""
        answer = await self._api.read("/pricebook")
        if not isinstance(answer.body, list):
            raise self._api.unexpected(answer, "answered with no price list:")
        self._prices = parse_prices(answer.body)
        self._prices_at = time.monotonic()
        return dict(self._prices)

    async def fetch_offers(self) -> list[Offer]:
        """GPU flavors in stock now, priced per GPU x count; unpriced and unknown GPUs left out."""
        if self._prices_at is None or time.monotonic() - self._prices_at > PRICE_TTL:
            await self.refresh_prices()
        # Both reads at once: the stock read is the latency between new stock and the create.
        flavors, stocks = await asyncio.gather(
            self._api.read("/core/flavors"), self._api.call("GET", "/core/stocks")
        )
        rows = flavor_rows(flavors.body)
        if rows is None:
            raise self._api.unexpected(flavors, "answered with no flavor list:")
        if not stocks.ok and stocks.status != 404:  # 404 is "Stocks Not Found": no counts
            raise self._api.unexpected(stocks)
        slots = parse_slots(stocks.body) if stocks.ok else {}
        offers = [to_offer(row, self._prices, slots) for row in rows]
        return [offer for offer in offers if offer is not None]

    # --- creating --------------------------------------------------------------------------

    def environment_name(self, region: str) -> str:
        """The environment this adapter uses in a region (the template with `{region}` filled)."""
        return self.environment_template.replace("{region}", region.lower())

    async def prepare(self, region: str, ssh_public_key: str | None) -> tuple[str, str]:
        """Make sure the region's environment and the key pair exist; (environment, key name).

        Both are remembered, so a later create in this region sends only the create itself.
        Failures here happen before any create was sent: no VM can exist because of them.
        """
        environment = await self._ensure_environment(region)
        key = await self._ensure_keypair(environment, ssh_public_key)
        return environment, key

    async def create_vm(
        self,
        offer: Offer,
        *,
        name: str,
        tag: str,
        ssh_public_key: str | None,
        disk_gb: int | None = None,
    ) -> VM:
        """Create one VM of `offer`'s flavor with a public IP and SSH open, named and labelled."""
        environment = self.environment_name(offer.region)
        from_cache = environment in self._environments
        environment, key = await self.prepare(offer.region, ssh_public_key)
        payload = {
            "name": name,
            "environment_name": environment,
            "flavor_name": offer.sku,
            "image_name": self.image,
            "key_name": key,
            "count": 1,
            "assign_floating_ip": True,
            "labels": [tag],
            "security_rules": [SSH_RULE],
        }
        answer = await self._api.call(
            "POST", "/core/virtual-machines", json=payload, is_create=True
        )
        if answer.ok:
            instances = answer.field("instances")
            vm = to_vm(instances[0]) if isinstance(instances, list) and instances else None
            if vm is None:
                raise OutcomeUnknown(
                    self.provider, f"create of {name} answered {answer.status} with no VM id"
                )
            return vm
        if answer.status == 409 and answer.reason in (None, "conflict"):
            raise NoCapacity(
                self.provider, f"{offer.sku} in {offer.region}: {answer.message}", status_code=409
            )
        if (
            answer.status == 400
            and answer.reason in (None, "bad_request")
            and await self._cannot_pay(offer)
        ):
            raise ProviderOutOfFunds(
                self.provider, f"create of {offer.sku}: {answer.message}", status_code=400
            )
        if answer.status == 404:
            self._environments.pop(environment, None)
            self._keypairs.discard((environment, key))
            if from_cache:
                # The environment or key pair we remembered is gone (deleted by hand?). Nothing
                # was created; the next attempt looks them up again, so the order is not failed.
                raise Unavailable(
                    self.provider, f"create of {offer.sku}: {answer.message}", status_code=404
                )
        raise Rejected(
            self.provider,
            f"create of {offer.sku} refused: {answer.message}",
            status_code=answer.status,
        )

    async def _cannot_pay(self, offer: Offer) -> bool:
        """Whether a 400 on create is about money: Hyperstack gives it no error code of its own,
        so the account's credit decides (never the message text)."""
        try:
            answer = await self._api.read("/billing/user-credit/credit")
        except ProviderError:
            log.warning("hyperstack: create got 400 and the credit could not be read")
            return True  # a money problem waits for the next offer; Rejected would end the order
        data = answer.field("data")
        data = data if isinstance(data, dict) else {}
        credit = wire_decimal(data.get("credit")) or Decimal(0)
        return data.get("can_create_instance") is False or credit < offer.price_per_hour

    async def _ensure_environment(self, region: str) -> str:
        name = self.environment_name(region)
        if name not in self._environments:
            listed = await self._api.read("/core/environments", {"search": name})
            found = [e for e in _items(listed, "environments") if e.get("name") == name]
            if found:
                self._environments[name] = str(found[0].get("region"))
            else:
                created = await self._api.call(
                    "POST", "/core/environments", json={"name": name, "region": region}
                )
                if created.status == 409:
                    return name  # made by someone else just now; its region is checked next time
                if not created.ok:
                    raise Rejected(
                        self.provider,
                        f"cannot create environment {name}: {created.message}",
                        status_code=created.status,
                    )
                self._environments[name] = region
        if self._environments[name] != region:
            raise Rejected(
                self.provider,
                f"environment {name} is in {self._environments[name]}, not {region}: "
                "the environment setting needs {region} in it to serve several regions",
            )
        return name

    async def _ensure_keypair(self, environment: str, ssh_public_key: str | None) -> str:
        public_key = ssh_public_key.strip() if ssh_public_key else None
        name = keypair_name(public_key) if public_key else self.key_name
        if (environment, name) in self._keypairs:
            return name
        listed = await self._api.read("/core/keypairs", {"search": name})
        same_name = [k for k in _items(listed, "keypairs") if k.get("name") == name]
        if not any(_environment_of(k) == environment for k in same_name):
            if public_key is None:
                public_key = next(
                    (k["public_key"] for k in same_name if isinstance(k.get("public_key"), str)),
                    None,
                )
            if public_key is None:
                raise Rejected(
                    self.provider,
                    f"key pair {name!r} exists in no Hyperstack environment: import it once "
                    "(any region) or give the order an SSH public key",
                )
            imported = await self._api.call(
                "POST",
                "/core/keypairs",
                json={"name": name, "environment_name": environment, "public_key": public_key},
            )
            if not imported.ok and imported.status != 409:
                raise Rejected(
                    self.provider,
                    f"key pair {name} refused in {environment}: {imported.message}",
                    status_code=imported.status,
                )
        self._keypairs.add((environment, name))
        return name

    # --- following VMs ---------------------------------------------------------------------

    async def get_vm(self, vm_id: str) -> VM | None:
        """The VM, or None once Hyperstack answers 404 (ids are integers: others never exist)."""
        if not vm_id.isdigit():
            return None
        answer = await self._api.call("GET", f"/core/virtual-machines/{vm_id}")
        if answer.status == 404:
            return None
        if not answer.ok:
            raise self._api.unexpected(answer)
        vm = to_vm(answer.field("instance"))
        if vm is None:
            raise self._api.unexpected(answer, "answered with no instance:")
        return vm

    async def find_vms(
        self, *, name: str, tag: str, offer: Offer, not_before: datetime
    ) -> list[VM]:
        """VMs named exactly `name` and labelled `tag` (names are unique per create attempt)."""
        found: list[VM] = []
        for page in range(1, MAX_PAGES + 1):
            params = {"search": name, "page": page, "pageSize": PAGE_SIZE}
            answer = await self._api.read("/core/virtual-machines", params)
            rows = _items(answer, "instances")
            for vm in (to_vm(row) for row in rows):
                if vm is not None and vm.name == name and tag in vm.tags:
                    found.append(vm)
            if len(rows) < PAGE_SIZE:
                break
        return found

    async def list_vms(self) -> list[VM]:
        """Every VM on the account (labels tell ours: `ap-order-...`)."""
        found: list[VM] = []
        for page in range(1, MAX_PAGES + 1):
            answer = await self._api.read(
                "/core/virtual-machines", {"page": page, "pageSize": PAGE_SIZE}
            )
            rows = _items(answer, "instances")
            found.extend(vm for vm in (to_vm(row) for row in rows) if vm is not None)
            if len(rows) < PAGE_SIZE:
                break
        return found

    async def delete_vm(self, vm_id: str) -> None:
        """Ask Hyperstack to delete the VM; one that is already gone (404) is fine."""
        if not vm_id.isdigit():
            return
        answer = await self._api.call("DELETE", f"/core/virtual-machines/{vm_id}")
        if answer.ok or answer.status == 404:
            return
        raise Rejected(
            self.provider,
            f"delete of VM {vm_id} refused: {answer.message}",
            status_code=answer.status,
        )

    async def balance(self) -> Decimal:
        """The account's credit in USD."""
        answer = await self._api.read("/billing/user-credit/credit")
        data = answer.field("data")
        credit = wire_decimal(data.get("credit") if isinstance(data, dict) else None)
        if credit is None:
            raise self._api.unexpected(answer, "answered with no credit:")
        return credit


def _items(answer: Answer, key: str) -> list[dict[str, Any]]:
    rows = answer.field(key)
    if not isinstance(rows, list):
        raise Unavailable(Provider.HYPERSTACK, f"{answer.where} answered with no {key} list")
    return [row for row in rows if isinstance(row, dict)]


def _environment_of(keypair: dict[str, Any]) -> str | None:
    environment = keypair.get("environment")
    if isinstance(environment, dict):
        name = environment.get("name")
        return name if isinstance(name, str) else None
    return environment if isinstance(environment, str) else None
