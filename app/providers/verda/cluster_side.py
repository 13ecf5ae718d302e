"""The Verda adapter's Instant Clusters: offers from the cluster types x `/cluster-availability`,
and each cluster as one VM whose id is `cluster:<Verda's cluster id>`.

A cluster's stock is its own read (`limits.CLUSTER_READ`): what it last found stays offered
while instance reads come and go, and the reverse. As for instances, a (cluster type, location)
a create has been answered for is left out until a cluster read begun after that answer says
it again: until then the unit the create took could be offered to a second create.
"""

import time
from collections.abc import Callable, Collection
from dataclasses import replace
from decimal import Decimal
from typing import Any

from app.core.market import disk_size_gb
from app.providers.base import VM, MachineKey, Offer, VMState
from app.providers.verda import cluster_parse, parse
from app.providers.verda.client import DeleteRefused, VerdaClient
from app.providers.verda.clusters import VerdaClusters
from app.providers.verda.stock_pairs import StockPairs
from app.providers.verda.volumes import VerdaVolumes, cluster_volume_ids, shared_volume_name


class ClusterSide:
    """Cluster types, stock and VMs, sent through the adapter's `VerdaClient`."""

    def __init__(
        self, api: VerdaClient, *, image: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._calls = VerdaClusters(api)
        self._volumes = VerdaVolumes(api)
        self._image = image
        self._types: dict[str, dict[str, Any]] = {}
        self._machines: frozenset[MachineKey] = frozenset()  # what the cluster types are
        self._stock = StockPairs(clock)  # cluster types in stock, as the last read said

    def __repr__(self) -> str:
        return f"ClusterSide(image={self._image!r})"

    @property
    def image(self) -> str:
        """The image cluster creates boot (a cluster image type or id)."""
        return self._image

    async def find_image(self) -> str | None:
        """How Verda knows the cluster image ("image type" or "id"), or None if it does not."""
        return parse.image_match(await self._calls.cluster_images(), self._image)

    # --- offers ----------------------------------------------------------------------------

    async def refresh_types(self) -> None:
        """Read `/cluster-types` (public, the whole cluster's price in USD) and cache them."""
        types = cluster_parse.cluster_types(await self._calls.cluster_types())
        made = (cluster_parse.cluster_offer(data, "") for data in types.values())
        self._types = types
        self._machines = frozenset(offer.machine for offer in made if offer is not None)

    def machines_by_type(self) -> dict[str, MachineKey]:
        """Each cluster type read (`refresh_types`) and the machine it is."""
        made = (cluster_parse.cluster_offer(data, "") for data in self._types.values())
        return {offer.sku: offer.machine for offer in made if offer is not None}

    def wanted(self, machines: Collection[MachineKey]) -> bool:
        """Whether some cluster type is one of `machines`."""
        return not self._machines.isdisjoint(machines)

    def missing_types(self) -> bool:
        """Whether the last read found a cluster type the cached types do not have."""
        return any(sku not in self._types for sku, _ in self._stock.listed)

    async def read_stock(self) -> None:
        """`GET /cluster-availability`: what is in stock now, for `offers`."""
        started = self._stock.started()
        body = await self._calls.cluster_availability()
        self._stock.read(cluster_parse.cluster_availability(body), started)

    def forget_stock(self) -> None:
        """No cluster is in stock as far as we know (its read failed)."""
        self._stock.forget()

    def offers(self, disk_price_per_gb_hour: Decimal) -> list[Offer]:
        """The clusters the last read found, less those a create has been answered for since;
        `disk_price_per_gb_hour` prices the shared volume (an NVMe volume)."""
        offers = []
        for sku, region in self._stock.current():
            data = self._types.get(sku)
            made = (
                None
                if data is None
                else cluster_parse.cluster_offer(data, region, disk_price_per_gb_hour)
            )
            if made is not None:
                offers.append(made)
        return offers

    # --- VMs -------------------------------------------------------------------------------

    async def create(
        self,
        offer: Offer,
        *,
        name: str,
        tag: str,
        ssh_key_ids: list[str],
        disk_gb: int | None,
        startup_script_id: str | None = None,
        image: str | None = None,
    ) -> VM:
        """`POST /clusters` with the body the SDK sends, the shared volume always sized (the
        SDK's default is 30 TB, billed); `startup_script_id` runs on its nodes at boot; `image`
        (a cluster image type or id) replaces the configured one."""
        body: dict[str, Any] = {
            "hostname": name,
            "cluster_type": offer.sku,
            "image": image or self._image,
            "description": cluster_parse.description(tag),
            "location_code": offer.region,
            "contract": "PAY_AS_YOU_GO",
            "ssh_key_ids": ssh_key_ids,
            "shared_volume": {"name": shared_volume_name(name), "size": disk_size_gb(disk_gb)},
            "tags": [{"key": parse.TAG_KEY, "value": tag}],
        }
        if startup_script_id is not None:
            body["startup_script_id"] = startup_script_id
        try:
            cluster_id = await self._calls.create_cluster(
                body, where=f"create {offer.sku} in {offer.region}"
            )
        finally:  # answered or not, the unit may be gone: only a later cluster read says
            self._stock.created((offer.sku, offer.region))
        return parse.accepted_vm(
            cluster_parse.cluster_vm_id(cluster_id), name=name, offer=offer, tag=tag
        )

    async def get(self, cluster_id: str) -> VM | None:
        """`GET /clusters/{id}` as a VM; None when Verda does not know the id. A discontinued
        cluster whose shared volume is still there is `DELETING` with `leftovers`: its delete
        goes again, and deletes the volume."""
        body = await self._calls.cluster(cluster_id)
        if body is None:
            return None
        vm = cluster_parse.cluster_vm(cluster_parse.cluster_of(body, cluster_id))
        if vm.state is VMState.GONE and await self._volumes.left(cluster_volume_ids(body)):
            return replace(vm, state=VMState.DELETING, leftovers=True)
        return vm

    async def find(self, *, name: str, tag: str) -> list[VM]:
        """Our clusters with this hostname and this tag in their description."""
        return [vm for vm in await self.list() if vm.name == name and tag in vm.tags]

    async def list(self) -> list[VM]:
        """Every cluster not discontinued that is ours: our resource tag on it, or (the
        fallback) the description we wrote, `autoprovision <tag>`."""
        found = cluster_parse.clusters(await self._calls.clusters())
        return [cluster_parse.cluster_vm(c) for c in found if c.ours is not None]

    async def delete(self, cluster_id: str) -> None:
        """Discontinue; once discontinued (Verda refuses a second), delete its shared volume
        for good. Gone already is fine, still being made is retry-later."""
        try:
            await self._calls.discontinue_cluster(cluster_id)
        except DeleteRefused as refused:
            body = await self._calls.cluster(cluster_id)
            if body is None:
                return
            current = cluster_parse.cluster_vm(cluster_parse.cluster_of(body, cluster_id))
            if current.state is VMState.GONE:
                for volume_id in await self._volumes.left(cluster_volume_ids(body)):
                    await self._volumes.delete(volume_id)
                return
            parse.after_refused_delete(current, f"cluster {cluster_id}", refused.status_code)
