"""The Verda adapter: offers from instance types x availability, VMs from `/v1/instances`.

Stock is read two ways, each path a rate-limit bucket of its own: the full list
(`/instance-availability`, every type in every location) and one instance type's
(`/instance-availability/{type}`, a bare `true` or `false`). While orders wait, the budget
interleaves the full list with the types they can use. A `false` takes that type out of what the
last full list said; a `true` says "somewhere", so the full list is read at once to find where
(when its bucket has room; if not, the next planned full read finds it). What the last full list
said about a (type, location) is stale once a create there has had its answer: reads of other
types leave it out until a full list read begun after that answer says it again, or a second
create would go to a unit the first one took.

Instant Clusters (`cluster_side.py`) are offers of `nodes > 1` with a stock read of their own
(`/cluster-availability`), and VMs whose id is `cluster:<id>`: every method below sends a
cluster's calls there, so the interface stays the same for both.
"""

import hashlib
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from pydantic import SecretStr

from app.core.market import disk_size_gb
from app.providers.base import (
    VM,
    Images,
    MachineKey,
    Offer,
    ProviderError,
    StockForecast,
    Unavailable,
    VMState,
    Volume,
)
from app.providers.budget import StockRead
from app.providers.http import Connections
from app.providers.verda import limits, parse
from app.providers.verda.client import DeleteRefused, VerdaClient
from app.providers.verda.cluster_parse import cluster_id_of
from app.providers.verda.cluster_side import ClusterSide
from app.providers.verda.clusters import VerdaClusters
from app.providers.verda.images import VerdaImages
from app.providers.verda.parse import PROVIDER
from app.providers.verda.scripts import StartupScripts
from app.providers.verda.stock_pairs import StockPairs
from app.providers.verda.volumes import VerdaVolumes, instance_volume_ids, os_volume_name

logger = logging.getLogger(__name__)

PRICE_MAX_AGE = 600.0  # seconds; prices change rarely, stock every poll
UNKNOWN_TYPE_RECHECK = 60.0  # a type in stock but not in the price list: re-read at most this often


class VerdaAdapter:
    """Verda (formerly DataCrunch) behind the `ProviderAdapter` interface."""

    provider = PROVIDER

    def __init__(
        self,
        client: Connections,
        *,
        base_url: str,
        client_id: SecretStr,
        client_secret: SecretStr,
        image: str,
        cluster_image: str = "ubuntu-24.04-cuda-13.0-cluster",
        timeout: float = 10.0,
        create_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = VerdaClient(
            client,
            base_url=base_url,
            client_id=client_id,
            client_secret=client_secret,
            timeout=timeout,
            create_timeout=create_timeout,
            clock=clock,
        )
        self.budget = self._api.http.budget
        self._image = image
        self._clusters = ClusterSide(self._api, image=cluster_image, clock=clock)
        self._images = VerdaImages(self._api, VerdaClusters(self._api))
        self._scripts = StartupScripts(self._api)
        self._volumes = VerdaVolumes(self._api)
        self._types: dict[str, dict[str, Any]] = {}
        self._machines: dict[str, MachineKey] = {}  # instance type -> its machine
        self._stock = StockPairs(clock)  # instance types in stock, as the full list said
        self._types_at: float | None = None
        self._disk_price = Decimal(0)  # USD per GB-hour of an OS volume, read with the types
        self._shared_price: Decimal | None = None  # and of a cluster's shared volume

    def __repr__(self) -> str:
        return (
            f"VerdaAdapter(base_url={self._api.http.base_url!r}, image={self._image!r}, "
            f"cluster_image={self._clusters.image!r})"
        )

    # --- offers ----------------------------------------------------------------------------

    async def refresh_prices(self) -> dict[str, dict[str, Any]]:
        """Read `/instance-types`, `/cluster-types` and `/volume-types` (public, prices in USD)
        now and cache them."""
        types = parse.instance_types(await self._api.instance_types())
        try:
            await self._clusters.refresh_types()
        except ProviderError as exc:  # clusters are as last read; instances must not wait
            logger.warning("verda: cluster types not read, kept as last read: %s", exc)
        volume_types = await self._api.volume_types()
        disk_price = parse.volume_price(volume_types)
        if disk_price is None:  # an OS volume we cannot price is one we cannot sell
            raise Unavailable(PROVIDER, "/volume-types has no NVMe price in USD")
        shared_price = parse.volume_price(volume_types, parse.SHARED_VOLUME_TYPE)
        if shared_price is None:  # nor a cluster whose shared volume we cannot price
            logger.warning("verda: no %s price in USD: no cluster offers", parse.SHARED_VOLUME_TYPE)
        self._types, self._disk_price, self._shared_price = types, disk_price, shared_price
        self._types_at = time.monotonic()
        self._machines = {}
        for sku, data in self._types.items():
            made = parse.offer(data, "")
            if made is not None:
                self._machines[sku] = made.machine
        return self._types

    def stock_reads(self, machines: Collection[MachineKey]) -> list[StockRead]:
        """The full list and the availability of each type that is one of `machines`, and the
        clusters' when a cluster type is one of them (only theirs when no machine is single)."""
        wanted = set(machines)
        clusters = [limits.CLUSTER_READ] if self._clusters.wanted(wanted) else []
        if clusters and all(machine.nodes > 1 for machine in wanted):
            return clusters
        types = sorted(sku for sku, machine in self._machines.items() if machine in wanted)
        return [limits.FULL_READ, *(limits.type_read(sku) for sku in types), *clusters]

    async def fetch_offers(self, machines: Collection[MachineKey] | None = None) -> list[Offer]:
        """On-demand stock now, priced from the cached types: the full list and the clusters',
        or (with `machines`) whichever read the budget lets go first (see the module docstring).
        Instances and clusters are each as their last read found them."""
        types = await self.refresh_prices() if self._age() > PRICE_MAX_AGE else self._types
        read = limits.FULL_READ
        if machines:
            _, read = self.budget.soonest(self.stock_reads(machines))
        if read == limits.CLUSTER_READ:
            await self._clusters.read_stock()
        elif read != limits.FULL_READ:
            sku = next(s for s in self._machines if limits.type_read(s) == read)
            if not await self._api.type_availability(sku):
                self._stock.drop_type(sku)
                return self._offers(types)
            if any(pair[0] == sku for pair in self._stock.current()):
                return self._offers(types)  # where it is is known already
            if not self.budget.fits(limits.FULL_READ):
                return self._offers(types)
            with self.budget.unplanned(limits.FULL_READ):
                await self._read_full_list()
        else:
            await self._read_full_list()
            if not machines:  # the full read (stock history) sees the clusters too
                try:
                    await self._clusters.read_stock()
                except ProviderError as exc:  # no cluster offers until a read works again
                    logger.warning("verda: cluster stock not read: %s", exc)
                    self._clusters.forget_stock()
        missing = any(sku not in types for sku, _ in self._stock.listed)
        missing = missing or self._clusters.missing_types()
        if missing and self._age() > UNKNOWN_TYPE_RECHECK:
            types = await self.refresh_prices()  # a type newer than our price list
        return self._offers(types)

    def stock_forecasts(self) -> list[StockForecast] | None:
        """None: Verda's stock answers say nothing of stock to come."""
        return None

    async def _read_full_list(self) -> None:
        started = self._stock.started()
        self._stock.read(parse.availability(await self._api.availability()), started)

    def _offers(self, types: dict[str, dict[str, Any]]) -> list[Offer]:
        offers = []
        for sku, region in self._stock.current():
            data = types.get(sku)
            made = parse.offer(data, region, self._disk_price) if data is not None else None
            if made is None:
                logger.debug("verda: no offer for %s in %s", sku, region)
                continue
            offers.append(made)
        if self._shared_price is not None:
            offers.extend(self._clusters.offers(self._shared_price))
        boots = self._images.boots  # what each type boots, as the last image read said
        return [replace(o, boots=boots[o.sku]) if o.sku in boots else o for o in offers]

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
        startup_script: str | None = None,
        image: str | None = None,
    ) -> VM:
        """`POST /v1/instances` (Verda answers 202 with the bare instance id), or for a cluster
        (`offer.nodes > 1`) `POST /v1/clusters`, its shared volume sized by `disk_gb`; a
        `startup_script` is made first (`POST /v1/scripts`, named `name`) and named by its id.
        `image` (an image type or id) replaces the configured one."""
        script_id = None
        if startup_script is not None:
            script_id = await self._scripts.make(name, startup_script)
        if offer.nodes > 1:
            keys = [await self._ssh_key_id(ssh_public_key)] if ssh_public_key else []
            return await self._clusters.create(
                offer,
                name=name,
                tag=tag,
                ssh_key_ids=keys,
                disk_gb=disk_gb,
                startup_script_id=script_id,
                image=image,
            )
        body: dict[str, Any] = {
            "instance_type": offer.sku,
            "image": image or self._image,
            "hostname": name,
            "description": f"autoprovision {tag}",
            "location_code": offer.region,
            "is_spot": False,
            "tags": [{"key": parse.TAG_KEY, "value": tag}],
        }
        if not offer.disk_fixed:
            body["os_volume"] = {
                "name": os_volume_name(name),
                "size": disk_size_gb(disk_gb),
                "tags": [{"key": parse.TAG_KEY, "value": tag}],
            }
        if ssh_public_key:
            body["ssh_key_ids"] = [await self._ssh_key_id(ssh_public_key)]
        if script_id is not None:
            body["startup_script_id"] = script_id
        try:
            vm_id = await self._api.create_instance(
                body, where=f"create {offer.sku} in {offer.region}"
            )
        finally:  # answered or not, the unit may be gone: only a later full list says
            self._stock.created((offer.sku, offer.region))
        return parse.accepted_vm(vm_id, name=name, offer=offer, tag=tag)

    async def get_vm(self, vm_id: str) -> VM | None:
        """`GET /v1/instances/{id}` (`/v1/clusters/{id}` for a cluster's); None when Verda does
        not know the id."""
        cluster_id = cluster_id_of(vm_id)
        if cluster_id is not None:
            return await self._clusters.get(cluster_id)
        body = await self._api.instance(vm_id)
        return None if body is None else parse.instance(body, vm_id)

    async def find_vms(
        self, *, name: str, tag: str, offer: Offer, not_before: datetime
    ) -> list[VM]:
        """Instances carrying our tag (exact match on Verda's side) and our hostname; for a
        cluster's offer, clusters with our hostname and our tag in their description."""
        if offer.nodes > 1:
            return await self._clusters.find(name=name, tag=tag)
        found = parse.instances(await self._api.instances(f"{parse.TAG_KEY}={tag}"))
        return [v for v in found if v.name == name and tag in v.tags]

    async def list_vms(self) -> list[VM]:
        """Every instance carrying our tag key, whatever its value, and every cluster described
        as ours. Either listing failing fails the whole: half a list must never look whole."""
        instances = parse.instances(await self._api.instances(parse.TAG_KEY))
        return [*instances, *await self._clusters.list()]

    async def delete_vm(self, vm_id: str) -> None:
        """Delete for good with every volume it has, read first to name them (`volumes.py`),
        or discontinue a cluster and then delete its shared volume; gone already is fine,
        still booting is retry-later."""
        cluster_id = cluster_id_of(vm_id)
        if cluster_id is not None:
            await self._clusters.delete(cluster_id)
            return
        body = await self._api.instance(vm_id)
        current = None if body is None else parse.instance(body, vm_id)
        if current is None or current.state in (VMState.GONE, VMState.DELETING):
            return  # what it left behind, if anything, is the reconciler's to delete
        try:
            await self._api.delete_instance(vm_id, instance_volume_ids(body))
        except DeleteRefused as refused:
            current = await self.get_vm(vm_id)
            parse.after_refused_delete(current, f"instance {vm_id}", refused.status_code)

    async def delete_startup_script(self, name: str) -> None:
        """Delete the startup script made (or last listed) for the VM named `name`; one this
        adapter does not know of waits for the reconciler's listing."""
        await self._scripts.delete(name)

    async def list_startup_scripts(self) -> list[str]:
        """The names of every startup script on the account (known by name after)."""
        return [script.name for script in await self._scripts.listed()]

    async def list_volumes(self) -> list[Volume]:
        """Our volumes (named or tagged as ours), in the trash too."""
        return await self._volumes.ours()

    async def delete_volume(self, volume_id: str) -> None:
        """Delete a volume for good."""
        await self._volumes.delete(volume_id)

    # --- account ---------------------------------------------------------------------------

    async def balance(self) -> Decimal:
        """`GET /v1/balance`: the amount in the project's billing currency."""
        return parse.balance(await self._api.balance())

    async def images(self) -> Images:
        """`GET /v1/images` and `GET /v1/images/cluster`, then each of them for every instance
        and cluster type (`images.py`): every type and id a create may name, and what runs
        which type; the offers boot what this read found."""
        if self._types_at is None:
            await self.refresh_prices()
        return await self._images.read(
            self._machines,
            self._clusters.machines_by_type(),
            image=self._image,
            cluster_image=self._clusters.image,
        )

    async def find_image(self) -> str | None:
        """How Verda knows the configured image ("image type" or "id"), or None if it does not."""
        return parse.image_match(await self._api.images(), self._image)

    @property
    def image(self) -> str:
        """The image creates boot (an image type or id)."""
        return self._image

    async def find_cluster_image(self) -> str | None:
        """How Verda knows the configured cluster image, or None if it does not."""
        return await self._clusters.find_image()

    @property
    def cluster_image(self) -> str:
        """The image cluster creates boot (a cluster image type or id)."""
        return self._clusters.image

    async def _ssh_key_id(self, public_key: str) -> str:
        """The id of this public key at Verda, registering it first if it is not there yet."""
        found = parse.ssh_key_id(await self._api.ssh_keys(), public_key)
        if found is not None:
            return found
        digest = hashlib.sha256(parse.key_material(public_key).encode()).hexdigest()[:12]
        return await self._api.add_ssh_key(f"autoprovision-{digest}", public_key.strip())
