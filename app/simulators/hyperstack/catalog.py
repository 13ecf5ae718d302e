"""Hyperstack's simulated catalogue: regions, GPUs and their pricebook rows, flavors, images.

Flavor and GPU names follow what Hyperstack's docs and third-party clients show (`n3-L40x1`,
`H100-80G-PCIe-NVLink`, `n3-B300-SXM6x8`, ...); where no source names a flavor the name is a
guess in the same pattern (see docs/simulators/hyperstack.md). Prices are per GPU per hour, as
the real pricebook gives them; a flavor costs the GPU's price times its GPU count.
"""

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from app.simulators.vms import CatalogEntry

REGIONS: dict[str, dict[str, Any]] = {
    "CANADA-1": {"id": 1, "country": "CA", "green_status": "GREEN"},
    "NORWAY-1": {"id": 2, "country": "NO", "green_status": "GREEN"},
    "US-1": {"id": 3, "country": "US", "green_status": "NOT_GREEN"},
}


@dataclass(frozen=True)
class GPU:
    """One of Hyperstack's GPU names, the catalogue model it is, and its sizing per GPU."""

    name: str
    model: str  # app.core.catalogue.GPU_MODELS
    interconnect: str
    price: Decimal  # USD per GPU per hour
    cpu: int  # vCPUs per GPU
    ram: int  # GB per GPU
    ephemeral: int  # GB per GPU


GPUS: dict[str, GPU] = {
    g.name: g
    for g in (
        GPU("B300-SXM", "B300", "sxm", Decimal("5.60"), 28, 350, 4000),
        GPU("B200-SXM", "B200", "sxm", Decimal("4.75"), 28, 240, 4000),
        GPU("H200-141G-SXM5", "H200", "sxm", Decimal("3.45"), 24, 225, 4000),
        GPU("H100-80G-SXM5", "H100", "sxm", Decimal("2.85"), 24, 225, 4000),
        GPU("H100-80G-PCIe-NVLink", "H100", "nvlink", Decimal("2.55"), 31, 180, 812),
        GPU("H100-80G-PCIe", "H100", "pcie", Decimal("2.40"), 28, 180, 750),
        GPU("A100-80G-SXM4", "A100-80G", "sxm", Decimal("1.60"), 24, 225, 4000),
        GPU("A100-80G-PCIe-NVLink", "A100-80G", "nvlink", Decimal("1.40"), 31, 180, 812),
        GPU("A100-80G-PCIe", "A100-80G", "pcie", Decimal("1.35"), 28, 120, 750),
        GPU("RTX-PRO6000-SE", "RTX-PRO-6000", "pcie", Decimal("1.80"), 30, 180, 1000),
        GPU("L40", "L40", "pcie", Decimal("1.00"), 28, 58, 725),
        GPU("RTX-A6000", "RTX-A6000", "pcie", Decimal("0.50"), 28, 58, 0),
    )
}

# Rows of the real pricebook that are not GPUs, or GPUs this simulator has no flavor for (the
# public IP's is listed apart: a VM with one bills it, and a test may take the row away).
OTHER_PRICE_ROWS: tuple[tuple[str, Decimal], ...] = (
    ("RTX-A4000", Decimal("0.58")),
    ("Cloud-SSD", Decimal("0.000112")),
    ("vCPU (cpu-only-flavors)", Decimal("0.0108")),
    ("RAM (cpu-only-flavors)", Decimal("0.0054")),
)

PUBLIC_IP_ROW, PUBLIC_IP_PRICE = "PublicIP", Decimal("0.00672")  # per IP per hour

# SkyPilot saw a GPU in the flavor list with no pricebook row; this one plays that part.
DEFAULT_UNPRICED_GPUS = ("A100-80G-SXM4",)

# (flavor name, GPU name, GPU count, regions)
_FLAVORS: tuple[tuple[str, str, int, tuple[str, ...]], ...] = (
    ("n3-B300-SXM6x8", "B300-SXM", 8, ("US-1", "CANADA-1")),
    ("n3-B200-SXM6x8", "B200-SXM", 8, ("CANADA-1", "US-1")),
    ("n3-H200x8", "H200-141G-SXM5", 8, ("US-1", "NORWAY-1")),
    ("n3-H100-SXM5x8", "H100-80G-SXM5", 8, ("NORWAY-1", "US-1")),
    ("n3-H100x8-NVLink", "H100-80G-PCIe-NVLink", 8, ("CANADA-1",)),
    ("n3-H100x1", "H100-80G-PCIe", 1, ("CANADA-1", "NORWAY-1")),
    ("n3-H100x2", "H100-80G-PCIe", 2, ("CANADA-1",)),
    ("n3-H100x4", "H100-80G-PCIe", 4, ("CANADA-1",)),
    ("n3-H100x8", "H100-80G-PCIe", 8, ("CANADA-1", "NORWAY-1")),
    ("n3-A100-SXM4x8", "A100-80G-SXM4", 8, ("US-1",)),
    ("n3-A100x8-NVLink", "A100-80G-PCIe-NVLink", 8, ("CANADA-1",)),
    ("n3-A100x1", "A100-80G-PCIe", 1, ("CANADA-1",)),
    ("n3-A100x2", "A100-80G-PCIe", 2, ("CANADA-1",)),
    ("n3-A100x4", "A100-80G-PCIe", 4, ("CANADA-1",)),
    ("n3-A100x8", "A100-80G-PCIe", 8, ("CANADA-1",)),
    ("n3-RTX-PRO6000-SEx1", "RTX-PRO6000-SE", 1, ("NORWAY-1", "US-1")),
    ("n3-RTX-PRO6000-SEx2", "RTX-PRO6000-SE", 2, ("NORWAY-1",)),
    ("n3-RTX-PRO6000-SEx4", "RTX-PRO6000-SE", 4, ("NORWAY-1",)),
    ("n3-RTX-PRO6000-SEx8", "RTX-PRO6000-SE", 8, ("NORWAY-1", "US-1")),
    ("n3-L40x1", "L40", 1, ("CANADA-1", "NORWAY-1")),
    ("n3-L40x2", "L40", 2, ("CANADA-1",)),
    ("n3-L40x4", "L40", 4, ("CANADA-1",)),
    ("n3-L40x8", "L40", 8, ("CANADA-1",)),
    ("n3-RTX-A6000x1", "RTX-A6000", 1, ("CANADA-1", "NORWAY-1")),
    ("n3-RTX-A6000x2", "RTX-A6000", 2, ("CANADA-1", "NORWAY-1")),
    ("n3-RTX-A6000x4", "RTX-A6000", 4, ("NORWAY-1",)),
    ("n3-RTX-A6000x8", "RTX-A6000", 8, ("NORWAY-1",)),
)

ROOT_DISK_GB = 100


def _entries() -> tuple[CatalogEntry, ...]:
    entries = []
    flavor_id = 100
    for flavor, gpu_name, count, regions in _FLAVORS:
        gpu = GPUS[gpu_name]
        for region in regions:
            flavor_id += 1
            entries.append(
                CatalogEntry(
                    sku=flavor,
                    region=region,
                    gpu_model=gpu.model,
                    gpu_count=count,
                    price_per_hour=gpu.price * count,
                    vcpus=gpu.cpu * count,
                    ram_gb=gpu.ram * count,
                    disk_gb=ROOT_DISK_GB,
                    interconnect=gpu.interconnect,
                    details={"gpu": gpu_name, "id": flavor_id, "ephemeral": gpu.ephemeral * count},
                )
            )
    return tuple(entries)


CATALOG: tuple[CatalogEntry, ...] = _entries()


def flavor_fields(entry: CatalogEntry, *, stock_available: bool) -> dict[str, Any]:
    """A GPU flavor as `GET /core/flavors` lists it."""
    return {
        "id": entry.details["id"],
        "name": entry.sku,
        "display_name": None,
        "region_name": entry.region,
        "cpu": entry.vcpus,
        "ram": float(entry.ram_gb),
        "disk": entry.disk_gb,
        "ephemeral": entry.details["ephemeral"],
        "gpu": entry.details["gpu"],
        "gpu_count": entry.gpu_count,
        "stock_available": stock_available,
        "created_at": "2024-05-01T10:00:00+00:00",
        "labels": [{"id": 1, "label": "network_optimised"}] if entry.gpu_count == 8 else [],
        "features": {"network_optimised": entry.gpu_count == 8, "hibernation": True},
        "image_restrictions": None,
    }


def extra_flavors(region: str) -> list[dict[str, Any]]:
    """Flavors that are not GPU VMs for sale: a CPU-only flavor and a Kubernetes-cluster one."""
    base = 900 + REGIONS[region]["id"] * 10
    cpu = {
        "id": base,
        "name": "n1-cpu-small",
        "display_name": None,
        "region_name": region,
        "cpu": 4,
        "ram": 8.0,
        "disk": 100,
        "ephemeral": 0,
        "gpu": "",
        "gpu_count": 0,
        "stock_available": True,
        "created_at": "2024-05-01T10:00:00+00:00",
        "labels": [],
        "features": {},
        "image_restrictions": None,
    }
    k8s = {
        **cpu,
        "id": base + 1,
        "name": "n3-H100x8-k8s",
        "cpu": 224,
        "ram": 1440.0,
        "ephemeral": 6000,
        "gpu": "H100-80G-PCIe",
        "gpu_count": 8,
    }
    return [cpu, k8s]


IMAGES: tuple[tuple[int, str, str, str], ...] = (
    # (id, name, type, version)
    (1, "Ubuntu Server 22.04 LTS R535 CUDA 12.2", "Ubuntu", "22.04"),
    (2, "Ubuntu Server 24.04 LTS R570 CUDA 12.8", "Ubuntu", "24.04"),
    (3, "Ubuntu Server 22.04 LTS R535 CUDA 12.2 with Docker", "Ubuntu", "22.04"),
    # Made up in the pattern of the names above: the R580 driver and CUDA 13 that Kimi K3's
    # engines need (../shared/models.md), so an order can name such an image here.
    (4, "Ubuntu Server 24.04 LTS R580 CUDA 13.0 with Docker", "Ubuntu", "24.04"),
)
