"""Verda's Instant Clusters' JSON (cluster types, availability, clusters) turned into the
service's types: pure functions, no I/O. A cluster is one `VM` whose id carries the prefix
`cluster:`, so that a VM id alone says which calls follow and delete it."""

import logging
import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from app.core.catalogue import ClusterInterconnect, Interconnect
from app.providers.base import VM, Machine, Offer, VMState
from app.providers.verda.parse import (
    PCIE_MODELS,
    PROVIDER,
    STATES,
    TAG_KEY,
    as_dict,
    as_int,
    as_list,
    availability,
    interconnect,
    many,
    nonempty_str,
    one,
    priced_model,
    timestamp,
    types_by_name,
)

logger = logging.getLogger(__name__)

CLUSTER_PREFIX = "cluster:"  # a VM id that is a cluster's: `cluster:<Verda's cluster id>`
# Our clusters' description: the owner's mark from before Verda tagged clusters, kept as the
# fallback to the resource tag.
DESCRIPTION_PREFIX = "autoprovision "
GPUS_PER_NODE = 8  # Verda's cluster nodes, when `node_details` does not say
_NODES = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*GPU\s+nodes?\b", re.IGNORECASE)  # "2x 8 GPU nodes"


@dataclass(frozen=True)
class ClusterNode:
    """One worker node of a cluster: reachable at its private address, through the jump host."""

    id: str
    hostname: str | None
    private_ip: str | None
    status: str  # Verda's word, as given


@dataclass(frozen=True)
class Cluster:
    """A Verda cluster as one object: its status, its worker nodes and its jump host's IP."""

    id: str
    status: str  # Verda's word, as given (`ordered`, `provisioning`, `running`, ...)
    state: VMState  # what that word means, as for an instance (`discontinued` is GONE)
    hostname: str | None
    location: str | None
    cluster_type: str | None
    created_at: datetime | None
    login_ip: str | None  # the jump host's public IP (`ip`): the only way in; None until up
    nodes: tuple[ClusterNode, ...]
    description: str | None = None  # ours: `autoprovision <tag>`
    tag: str | None = None  # our resource tag's value (`autoprovision=<tag>`), if it has one

    @property
    def ours(self) -> str | None:
        """Our tag for it: its resource tag (Verda's since 2026-09-11), else the one in its
        description (older clusters, or tags lost); None when it is not ours."""
        return self.tag or tag_of(self.description)


def cluster_vm_id(cluster_id: str) -> str:
    """The VM id of the cluster Verda knows as `cluster_id`."""
    return CLUSTER_PREFIX + cluster_id


def cluster_id_of(vm_id: str) -> str | None:
    """Verda's cluster id in a cluster's VM id; None for any other VM id (an instance's)."""
    return vm_id.removeprefix(CLUSTER_PREFIX) if vm_id.startswith(CLUSTER_PREFIX) else None


def description(tag: str) -> str:
    """What a create sends as the description of a VM or cluster tagged `tag`."""
    return DESCRIPTION_PREFIX + tag


def tag_of(text: str | None) -> str | None:
    """The tag in a description we wrote (`autoprovision <tag>`); None in anyone else's."""
    if text is None or not text.startswith(DESCRIPTION_PREFIX):
        return None
    return text.removeprefix(DESCRIPTION_PREFIX).strip() or None


def cluster_types(body: Any) -> dict[str, dict[str, Any]]:
    """`GET /cluster-types` -> each cluster type's object by its name (`16B200`)."""
    return types_by_name(body, "cluster_type", "/cluster-types")


def cluster_availability(body: Any) -> list[tuple[str, str]]:
    """`GET /cluster-availability` -> (cluster type, location) pairs in stock."""
    return availability(body, "/cluster-availability")


def nodes_of(data: dict[str, Any]) -> int | None:
    """How many nodes a cluster type has: `node_details` ("2x 8 GPU nodes"), else its GPUs
    over 8; None when neither says."""
    gpus = as_int(as_dict(data.get("gpu")).get("number_of_gpus"))
    for line in as_list(data.get("node_details")):
        found = _NODES.match(line) if isinstance(line, str) else None
        if found is not None:
            nodes, per_node = int(found[1]), int(found[2])
            if nodes >= 1 and per_node >= 1 and (gpus is None or gpus == nodes * per_node):
                return nodes
    if gpus is not None and gpus > GPUS_PER_NODE and gpus % GPUS_PER_NODE == 0:
        return gpus // GPUS_PER_NODE
    return None


def cluster_offer(
    data: dict[str, Any], region: str, disk_price_per_gb_hour: Decimal = Decimal(0)
) -> Offer | None:
    """An `Offer` for one cluster type in one location (its whole price, its GPUs, vCPUs and
    RAM per node), or None when it is not a cluster of a GPU we know.

    `disk_price_per_gb_hour` prices the shared volume, which the create sizes.
    """
    sku = data.get("cluster_type")
    gpus = as_int(as_dict(data.get("gpu")).get("number_of_gpus"))
    nodes = nodes_of(data)
    if not isinstance(sku, str) or not gpus or nodes is None or nodes < 2 or gpus % nodes:
        logger.debug("verda: leaving out cluster type %r (gpus %r, nodes %r)", sku, gpus, nodes)
        return None
    priced = priced_model(data, gpus)
    if priced is None:
        logger.debug("verda: leaving out cluster type %s (model %r)", sku, data.get("model"))
        return None
    model, price = priced
    vcpus = as_int(as_dict(data.get("cpu")).get("number_of_cores"))
    ram = as_int(as_dict(data.get("memory")).get("size_in_gigabytes"))
    return Offer(
        provider=PROVIDER,
        region=region,
        sku=sku,
        gpu_model=model,
        gpu_count=gpus // nodes,  # per node
        price_per_hour=price,  # the whole cluster's
        # A cluster's nodes are 8-GPU HGX boards: SXM unless the model is a PCIe card.
        interconnect=interconnect(sku, model, data)
        or (None if model in PCIE_MODELS else Interconnect.SXM),
        # Per node, as an instance of the same node shows them (Verda gives the whole's).
        vcpus=None if vcpus is None else vcpus // nodes,
        ram_gb=None if ram is None else ram // nodes,
        disk_gb=None,
        disk_fixed=False,  # the shared volume is sized by the create
        disk_price_per_gb_hour=disk_price_per_gb_hour,
        nodes=nodes,
        cluster_interconnect=ClusterInterconnect.INFINIBAND,
    )


def cluster(data: Any) -> Cluster | None:
    """A `Cluster` from Verda's cluster object; None if it lacks an id. Nodes without an id are
    left out."""
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
        return None
    nodes = tuple(
        ClusterNode(
            id=node["id"],
            hostname=nonempty_str(node.get("hostname")),
            private_ip=nonempty_str(node.get("private_ip")),
            status=_status(node.get("status")),
        )
        for node in as_list(data.get("worker_nodes"))
        if isinstance(node, dict) and isinstance(node.get("id"), str) and node["id"]
    )
    status = _status(data.get("status"))
    return Cluster(
        id=data["id"],
        status=status,
        state=STATES.get(status, VMState.UNKNOWN),
        hostname=nonempty_str(data.get("hostname")),
        location=nonempty_str(data.get("location")),
        cluster_type=nonempty_str(data.get("cluster_type")),
        created_at=timestamp(data.get("created_at")),
        login_ip=nonempty_str(data.get("ip")),
        nodes=nodes,
        description=nonempty_str(data.get("description")),
        tag=next(
            (
                t["value"]
                for t in as_list(data.get("tags"))
                if isinstance(t, dict) and t.get("key") == TAG_KEY and nonempty_str(t.get("value"))
            ),
            None,
        ),
    )


def cluster_of(body: Any, cluster_id: str) -> Cluster:
    """`GET /clusters/{id}` -> the cluster."""
    return one(cluster, body, f"cluster {cluster_id}")


def clusters(body: Any) -> list[Cluster]:
    """`GET /clusters` -> its clusters (entries without an id left out)."""
    return many(cluster, body, "/clusters")


def cluster_vm(found: Cluster) -> VM:
    """A cluster as one `VM`: its login node's public IP, its worker nodes as `machines`."""
    tag = found.ours
    return VM(
        provider=PROVIDER,
        id=cluster_vm_id(found.id),
        state=found.state,
        provider_status=found.status,
        name=found.hostname,
        region=found.location,
        sku=found.cluster_type,
        ip=found.login_ip,
        created_at=found.created_at,
        tags=() if tag is None else (tag,),
        machines=tuple(
            Machine(
                id=node.id,
                state=STATES.get(node.status, VMState.UNKNOWN),
                provider_status=node.status,
                name=node.hostname,
                ip=node.private_ip,
            )
            for node in found.nodes
        ),
    )


def _status(value: Any) -> str:
    return value if isinstance(value, str) and value else "unknown"
