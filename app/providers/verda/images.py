"""Which OS images run which Verda machine: `GET /v1/images?instance_type=` for each instance
type and `GET /v1/images/cluster?instance_type=` for each cluster type (Verda refuses an image
a type does not list: 400 "Operating system is not valid for this instance type"), less those
whose driver is too old for the GPU, best first.

Read when the watcher reads the image lists (at start and hourly), never on the way from a
stock read to a create: the offers carry what was read (`Offer.boots`).
"""

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from app.core.market import Boots
from app.providers.base import Image, ImageFit, Images, MachineKey, ProviderError, ranked
from app.providers.verda import parse
from app.providers.verda.client import VerdaClient
from app.providers.verda.clusters import VerdaClusters

logger = logging.getLogger(__name__)


class VerdaImages:
    """The image lists, per instance and cluster type, and what each type's offers boot."""

    def __init__(self, api: VerdaClient, clusters: VerdaClusters) -> None:
        self._api = api
        self._clusters = clusters
        self._fits: dict[str, ImageFit] = {}  # a type whose read failed keeps its last
        self._reads = 0  # reads so far, and the one each type was last read in
        self._read_in: dict[str, int] = {}
        self.boots: dict[str, Boots] = {}  # instance or cluster type -> what its offers boot

    def __repr__(self) -> str:
        return f"VerdaImages({len(self._fits)} types read)"

    async def read(
        self,
        machines: Mapping[str, MachineKey],
        clusters: Mapping[str, MachineKey],
        *,
        image: str,
        cluster_image: str,
    ) -> Images:
        """Every image, then the images of each type of `machines` (instance types) and of
        `clusters` (cluster types); `image` and `cluster_image` are the configured ones."""
        listed = {i.name: i for i in parse.images(await self._api.images())}
        listed.update(
            (i.name, i) for i in parse.images(await self._clusters.cluster_images(), cluster=True)
        )
        self._reads += 1
        kinds = [(False, machines, image), (True, clusters, cluster_image)]
        # Those read longest ago first: a read the rate limit cuts short goes on from there.
        wanted = [(c, sku, m, i) for c, types, i in kinds for sku, m in types.items()]
        wanted.sort(key=lambda w: (self._read_in.get(w[1], 0), w[1]))
        for cluster, sku, machine, configured in wanted:
            try:
                body = await self._of_type(sku, cluster=cluster)
            except ProviderError as exc:  # that type keeps what was last read of it
                logger.warning("verda: images of %s not read: %s", sku, exc)
                continue
            fitting = parse.images(body, cluster=cluster)
            for found in fitting:
                listed.setdefault(found.name, found)
            name = _named(configured, listed.values())
            self._read_in[sku] = self._reads
            self._fits[sku] = ImageFit(
                sku=sku,
                machine=machine,
                images=ranked(fitting, gpu_model=machine.gpu_model, configured=name),
                configured=name,
            )
        read = Images.of(listed.values(), (self._fits[s] for s in sorted(self._fits)))
        self.boots = {fit.sku: read.boots(fit) for fit in read.fits}
        return read

    async def _of_type(self, sku: str, *, cluster: bool) -> Any:
        if cluster:
            return await self._clusters.cluster_images(sku)
        return await self._api.images(sku)


def _named(configured: str, listed: Iterable[Image]) -> str:
    """The image type of the configured image, which the setting may give by id."""
    return next((i.name for i in listed if configured in i.aliases), configured)
