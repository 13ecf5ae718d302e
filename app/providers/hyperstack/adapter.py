"""The Hyperstack adapter: offers from flavors, stocks and the pricebook; VMs in per-region
environments, named and labelled so that a create with no answer can be found again."""

import asyncio
import hashlib
import logging
import time
from collections.abc import Collection
from dataclasses import replace
from datetime import datetime
from decimal import Decimal

from pydantic import SecretStr

from app.providers import assembly
from app.providers.base import (
    VM,
    Boots,
    Images,
    MachineKey,
    Offer,
    OutcomeUnknown,
    Rejected,
    StockForecast,
    Unavailable,
    Volume,
)
from app.providers.budget import StockRead
from app.providers.http import Connections
from app.providers.hyperstack import images, limits, parse
from app.providers.hyperstack.client import HyperstackClient, NotFound
from app.providers.hyperstack.parse import PROVIDER

log = logging.getLogger(__name__)

PRICE_TTL = 600.0  # the pricebook changes rarely; stock is read on every poll
PAGE_SIZE = 100
MAX_PAGES = 20
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


class HyperstackAdapter:
    """`ProviderAdapter` for Hyperstack's Infrahub API (`api_key` header)."""

    provider = PROVIDER

    def __init__(
        self,
        client: Connections,
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
        self.budget = self._api.http.budget
        self.environment_template = environment
        self.key_name = key_name
        self.image = image
        self._prices: dict[str, Decimal] = {}
        self._prices_at: float | None = None
        self._forecasts: list[StockForecast] | None = None  # as the last stock read said
        self._environments: dict[str, str] = {}  # name -> region
        self._keypairs: set[tuple[str, str]] = set()
        self._boots: dict[tuple[str, str | None], Boots] = {}  # (flavor, region): its images
        # Clusters are N of its VMs created together (Hyperstack sells no cluster).
        self._clusters = assembly.NodeAssembly(
            PROVIDER,
            search=self._all_vms,
            delete_one=self._api.delete_vm,
        )

    def __repr__(self) -> str:
        return (
            f"HyperstackAdapter(base_url={self._api.http.base_url!r}, "
            f"environment={self.environment_template!r}, key_name={self.key_name!r})"
        )

    # --- offers ----------------------------------------------------------------------------

    async def refresh_prices(self) -> dict[str, Decimal]:
        """Read the pricebook now (fetch_offers does it by itself every 10 minutes)."""
        self._prices = parse.price_list(await self._api.pricebook())
        self._prices_at = time.monotonic()
        if parse.PUBLIC_IP_ROW not in self._prices:
            log.warning("hyperstack: the pricebook has no PublicIP row: offers price no IP")
        return dict(self._prices)

    def stock_reads(self, machines: Collection[MachineKey]) -> list[StockRead]:
        """One read, whatever is wanted: every flavor's stock comes in it."""
        return [limits.STOCK_READ]

    async def fetch_offers(self, machines: Collection[MachineKey] | None = None) -> list[Offer]:
        """GPU flavors in stock now, priced per GPU x count and the public IP each VM gets;
        unpriced and unknown GPUs left out.
        Where `machines` has clusters, the flavors in stock N at once in a region as clusters."""
        if self._prices_at is None or time.monotonic() - self._prices_at > PRICE_TTL:
            await self.refresh_prices()
        # Both reads at once: the stock read is the latency between new stock and the create.
        flavors, stocks = await asyncio.gather(self._api.flavors(), self._api.stocks())
        rows = parse.flavor_rows(flavors)
        slots = parse.stock_slots(stocks) if stocks is not None else {}
        self._forecasts = parse.forecasts(stocks) if stocks is not None else None
        made = (parse.to_offer(row, self._prices, slots) for row in rows)
        offers = [self._booting(offer) for offer in made if offer is not None]
        return offers + assembly.assembled_offers(offers, machines or ())

    def _booting(self, offer: Offer) -> Offer:
        """`offer` with the images its flavor boots in its region, as last read."""
        boots = self._boots.get((offer.sku, offer.region))
        return offer if boots is None else replace(offer, boots=boots)

    def stock_forecasts(self) -> list[StockForecast] | None:
        """What the last stock read's `planned_7_days`/`planned_30_days` said, per region and
        GPU model; None when it had no stocks to read ("Stocks Not Found")."""
        return self._forecasts

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
        startup_script: str | None = None,
        image: str | None = None,
    ) -> VM:
        """Create one VM of `offer`'s flavor with a public IP and SSH open, named and labelled,
        a `startup_script` as its `user_data`, booting `image` (a name) or the configured one;
        a cluster's offer: its N VMs at once (`assembly`), each with the script and image."""
        if offer.nodes > 1:
            await self.prepare(offer.region, ssh_public_key)  # once, before the N creates

            async def create_node(single: Offer, node: str) -> VM:
                return await self._create_single(
                    single,
                    name=node,
                    tag=tag,
                    ssh_public_key=ssh_public_key,
                    startup_script=startup_script,
                    image=image,
                )

            return await self._clusters.create(offer, name=name, create_one=create_node)
        return await self._create_single(
            offer,
            name=name,
            tag=tag,
            ssh_public_key=ssh_public_key,
            startup_script=startup_script,
            image=image,
        )

    async def _create_single(
        self,
        offer: Offer,
        *,
        name: str,
        tag: str,
        ssh_public_key: str | None,
        startup_script: str | None,
        image: str | None = None,
    ) -> VM:
        environment = self.environment_name(offer.region)
        from_cache = environment in self._environments
        environment, key = await self.prepare(offer.region, ssh_public_key)
        payload = {
            "name": name,
            "environment_name": environment,
            "flavor_name": offer.sku,
            "image_name": image or self.image,
            "key_name": key,
            "count": 1,
            "assign_floating_ip": True,
            "labels": [tag],
            "security_rules": [SSH_RULE],
        }
        if startup_script is not None:
            payload["user_data"] = startup_script  # cloud-init runs it once, at first boot
        try:
            body = await self._api.create_vm(
                payload, region=offer.region, price_per_hour=offer.price_per_hour
            )
        except NotFound as missing:
            self._environments.pop(environment, None)
            self._keypairs.discard((environment, key))
            if from_cache:
                # The environment or key pair we remembered is gone (deleted by hand?). Nothing
                # was created; the next attempt looks them up again, so the order is not failed.
                raise Unavailable(
                    self.provider,
                    f"{missing.message} (a remembered environment or key pair is gone)",
                    status_code=missing.status_code,
                ) from missing
            raise
        vm = parse.created_vm(body)
        if vm is None:
            raise OutcomeUnknown(self.provider, f"create of {name} answered with no VM id")
        return vm

    async def _ensure_environment(self, region: str) -> str:
        name = self.environment_name(region)
        if name not in self._environments:
            found = parse.environment_region(await self._api.environments(name), name)
            if found is not None:
                self._environments[name] = found
            elif await self._api.create_environment(name, region):
                self._environments[name] = region
            else:
                return name  # made by someone else just now; its region is checked next time
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
        same_name = parse.keypairs_named(await self._api.keypairs(name), name)
        if not any(parse.keypair_environment(k) == environment for k in same_name):
            if public_key is None:
                public_key = parse.keypair_public_key(same_name)
            if public_key is None:
                raise Rejected(
                    self.provider,
                    f"key pair {name!r} exists in no Hyperstack environment: import it once "
                    "(any region) or give the order an SSH public key",
                )
            await self._api.import_keypair(name, environment, public_key)
        self._keypairs.add((environment, name))
        return name

    # --- read-only look-ups (for `autoprovision doctor`) -------------------------------------

    async def gpu_regions(self) -> list[str]:
        """The regions where Hyperstack sells GPU VMs (from its flavors, in stock or not)."""
        return parse.gpu_regions(parse.flavor_rows(await self._api.flavors()))

    async def images(self) -> Images:
        """`GET /core/images` and `GET /core/flavors`: the names of the images of every region
        (a cluster's nodes are VMs, so they boot the same ones), and which run each flavor in
        each region (`images.py`); the offers boot what this read found."""
        images_body, flavors_body = await asyncio.gather(self._api.images(), self._api.flavors())
        read = images.image_fits(
            images_body, parse.flavor_rows(flavors_body), configured=self.image
        )
        self._boots = {(fit.sku, fit.region): read.boots(fit) for fit in read.fits}
        return read

    async def has_image(self, region: str) -> bool:
        """Whether the configured image can be booted in `region`."""
        return self.image in parse.image_names(await self._api.images(region))

    async def environment_region(self, region: str) -> str | None:
        """The region of the environment this adapter would use in `region`, if it exists."""
        name = self.environment_name(region)
        return parse.environment_region(await self._api.environments(name), name)

    async def keypair_environments(self) -> list[str]:
        """The environments holding a key pair named `key_name` (the one used without a key)."""
        found = parse.keypairs_named(await self._api.keypairs(self.key_name), self.key_name)
        return sorted({env for k in found if (env := parse.keypair_environment(k)) is not None})

    # --- following VMs ---------------------------------------------------------------------

    async def get_vm(self, vm_id: str) -> VM | None:
        """The VM, or None once Hyperstack answers 404 (ids are integers: others never exist);
        an assembled cluster, from its nodes listed now."""
        if assembly.is_assembled(vm_id):
            return await self._clusters.get(vm_id)
        body = await self._api.vm(vm_id)
        return None if body is None else parse.instance(body)

    async def find_vms(
        self, *, name: str, tag: str, offer: Offer, not_before: datetime
    ) -> list[VM]:
        """VMs named exactly `name` and labelled `tag` (names are unique per create attempt);
        for a cluster's offer, the cluster of the nodes made (`name-<n>`)."""
        if offer.nodes > 1:
            return await self._clusters.find(name=name, tag=tag)
        found = await self._all_vms(search=name)
        return [vm for vm in found if vm.name == name and tag in vm.tags]

    async def list_vms(self) -> list[VM]:
        """Every VM on the account (labels tell ours: `ap-order-...`), each cluster's nodes as
        one VM."""
        return assembly.grouped(PROVIDER, await self._all_vms())

    async def _all_vms(self, search: str | None = None) -> list[VM]:
        found: list[VM] = []
        for page in range(1, MAX_PAGES + 1):
            body = await self._api.vms(page=page, page_size=PAGE_SIZE, search=search)
            rows = parse.listed(body, "instances")
            found.extend(vm for vm in map(parse.to_vm, rows) if vm is not None)
            if len(rows) < PAGE_SIZE:
                break
        return found

    async def delete_vm(self, vm_id: str) -> None:
        """Ask Hyperstack to delete the VM (a cluster: each of its nodes); one that is already
        gone (404) is fine."""
        if assembly.is_assembled(vm_id):
            await self._clusters.delete(vm_id)
        else:
            await self._api.delete_vm(vm_id)

    async def balance(self) -> Decimal:
        """The account's credit in USD."""
        return parse.credit(await self._api.credit())

    async def delete_startup_script(self, name: str) -> None:
        """Nothing to do: a script is the VM's `user_data` and goes with it."""

    async def list_startup_scripts(self) -> list[str]:
        """None kept apart from VMs."""
        return []

    async def list_volumes(self) -> list[Volume]:
        """None: a VM's disks go with it (no bootable volume is made)."""
        return []

    async def delete_volume(self, volume_id: str) -> None:
        """Nothing to do: no volume is kept apart from VMs."""
