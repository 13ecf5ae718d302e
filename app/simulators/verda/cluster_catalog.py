"""What the simulated Verda sells as Instant Clusters: cluster types, where, at what price (the
images a cluster boots are `images.py`).

A cluster type (`16B200`: 16 B200 GPUs) is 8-GPU worker nodes on 400 Gb/s InfiniBand, plus a
jump host, sold as one object: one create, one id, one price for the whole cluster. Names and
JSON shapes follow `GET /v1/cluster-types` as the official SDK reads it (`ClusterType`: prices
as decimal strings); prices are the same per GPU-hour as the 8-GPU instance of the family.
"""

import uuid
from decimal import Decimal
from typing import Any

from app.simulators.verda.catalog import FAMILIES, GPUFamily, instance_type_json
from app.simulators.vms import CatalogEntry

GPUS_PER_NODE = 8
DEFAULT_SHARED_VOLUME_GB = 30000  # the SDK's default `shared_volume.size` (30 TB)
SHARED_VOLUME_MOUNT = "/home"  # Verda mounts the shared volume as every node's /home
FABRIC = "400 Gb/s InfiniBand"

# GPU model -> (GPUs per cluster, locations). Verda's clusters go up to 16 nodes of 8 GPUs.
SIZES: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = {
    "B300": ((16, 32), ("FIN-03",)),
    "B200": ((16, 32, 64), ("FIN-01", "FIN-03")),
    "H200": ((16, 32), ("FIN-01", "ICE-01")),
}

_NS = uuid.UUID("0c6f3f8e-2b6a-4a57-9d1e-5f4c3a2b1d0e")


def cluster_type_json(family: GPUFamily, gpus: int) -> dict[str, Any]:
    """The `GET /v1/cluster-types` element for a cluster of `gpus` GPUs of this family."""
    node = instance_type_json(family, GPUS_PER_NODE)
    nodes = gpus // GPUS_PER_NODE
    cores = node["cpu"]["number_of_cores"] * nodes
    ram = node["memory"]["size_in_gigabytes"] * nodes
    gpu_memory = node["gpu_memory"]["size_in_gigabytes"] * nodes
    name = f"{gpus}{family.model}"
    return {
        "id": str(uuid.uuid5(_NS, name)),
        "cluster_type": name,
        "model": family.model,
        "name": family.label,
        "manufacturer": "NVIDIA",
        "cpu": {"description": f"{cores} CPU", "number_of_cores": cores},
        "gpu": {"description": f"{gpus}x {family.label}", "number_of_gpus": gpus},
        "gpu_memory": {"description": f"{gpu_memory}GB GPU RAM", "size_in_gigabytes": gpu_memory},
        "memory": {"description": f"{ram}GB RAM", "size_in_gigabytes": ram},
        "price_per_hour": str(Decimal(node["price_per_hour"]) * nodes),
        "currency": "usd",
        "node_details": [f"{nodes}x {GPUS_PER_NODE} GPU nodes", FABRIC],
        "supported_os": ["ubuntu-22.04", "ubuntu-24.04"],
    }


def build_cluster_catalog() -> tuple[tuple[CatalogEntry, ...], dict[str, dict[str, Any]]]:
    """Every (cluster type, location) the simulator can deploy, and each type's JSON by name."""
    entries: list[CatalogEntry] = []
    types: dict[str, dict[str, Any]] = {}
    for family in FAMILIES:
        if family.model not in SIZES:
            continue
        sizes, locations = SIZES[family.model]
        for gpus in sizes:
            data = cluster_type_json(family, gpus)
            types[data["cluster_type"]] = data
            entries.extend(
                CatalogEntry(
                    sku=data["cluster_type"],
                    region=location,
                    gpu_model=family.gpu_model,
                    gpu_count=gpus,
                    price_per_hour=Decimal(data["price_per_hour"]),
                    vcpus=data["cpu"]["number_of_cores"],
                    ram_gb=data["memory"]["size_in_gigabytes"],
                    disk_gb=DEFAULT_SHARED_VOLUME_GB,  # the shared volume, unless sized
                    interconnect=family.interconnect,
                    details={"node_details": data["node_details"]},
                    nodes=gpus // GPUS_PER_NODE,
                )
                for location in locations
            )
    return tuple(entries), types


CLUSTER_ENTRIES, CLUSTER_TYPES = build_cluster_catalog()
