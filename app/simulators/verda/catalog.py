"""What the simulated Verda sells: instance types, where, at what price; locations (the
images are `images.py`).

Names and JSON shapes follow `GET /v1/instance-types` (prices are decimal strings there);
prices are late-2026 on-demand list prices in USD for the whole machine.
"""

import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from app.simulators.vms import CatalogEntry

LOCATIONS: tuple[dict[str, str], ...] = (
    {"code": "FIN-01", "name": "Finland 1", "country_code": "FI"},
    {"code": "FIN-02", "name": "Finland 2", "country_code": "FI"},
    {"code": "FIN-03", "name": "Finland 3", "country_code": "FI"},
    {"code": "ICE-01", "name": "Iceland 1", "country_code": "IS"},
)
LOCATION_CODES = frozenset(loc["code"] for loc in LOCATIONS)

_NS = uuid.UUID("5b0e3c52-6a43-4c36-9d61-2f1f0a3b7c11")
_CENT = Decimal("0.01")
DEFAULT_OS_VOLUME_GB = 100


@dataclass(frozen=True)
class GPUFamily:
    """One GPU as Verda describes it, with the per-GPU numbers its instance types scale."""

    model: str  # Verda's `model` field
    label: str  # how Verda names it in `gpu.description` / `name`
    gpu_model: str  # app.core.catalogue.GPU_MODELS
    memory_gb: int  # per GPU, as Verda reports it
    price: Decimal  # per GPU and hour
    vcpus: int  # per GPU
    ram_gb: int  # per GPU
    sku: str  # the type name for 1 GPU; more GPUs scale the leading count and the vCPUs
    counts: tuple[int, ...]
    locations: tuple[str, ...]
    cpu_model: str
    p2p: str | None
    interconnect: str | None
    fixed_disk_gb: int | None = None


FAMILIES: tuple[GPUFamily, ...] = (
    GPUFamily("B300", "B300 SXM6 268GB", "B300", 268, Decimal("5.69"), 30, 275, "1B300.30V",
              (1, 2, 4, 8), ("FIN-03", "ICE-01"), "Intel Xeon 6960P", "1.8 TB/s", "sxm"),
    GPUFamily("B200", "B200 SXM6 180GB", "B200", 180, Decimal("4.49"), 30, 184, "1B200.30V",
              (1, 2, 4, 8), ("FIN-01", "FIN-03"), "AMD Turin", "1.8 TB/s", "sxm"),
    GPUFamily("H200", "H200 SXM5 141GB", "H200", 141, Decimal("3.39"), 44, 185,
              "1H200.141S.44V", (1, 2, 4, 8), ("FIN-01", "FIN-02", "ICE-01"), "AMD Genoa",
              "900 GB/s", "sxm"),
    GPUFamily("H100", "H100 SXM5 80GB", "H100", 80, Decimal("2.59"), 30, 120, "1H100.80S.30V",
              (1, 2, 4, 8), ("FIN-01", "FIN-02", "FIN-03"), "AMD Genoa", "600 GB/s", "sxm"),
    GPUFamily("A100", "A100 SXM4 80GB", "A100-80G", 80, Decimal("1.49"), 22, 120, "1A100.22V",
              (1, 2, 4, 8), ("FIN-01", "FIN-02"), "AMD Milan", "600 GB/s", "sxm"),
    GPUFamily("A100", "A100 SXM4 40GB", "A100-40G", 40, Decimal("0.99"), 22, 80,
              "1A100.40S.22V", (1, 8), ("FIN-01",), "AMD Rome", "600 GB/s", "sxm"),
    GPUFamily("L40S", "L40S 48GB", "L40S", 48, Decimal("1.09"), 20, 60, "1L40S.20V",
              (1, 2, 4, 8), ("FIN-02", "ICE-01"), "AMD Genoa", None, "pcie"),
    GPUFamily("RTX PRO 6000", "RTX PRO 6000 96GB", "RTX-PRO-6000", 96, Decimal("1.59"), 28, 120,
              "1RTXPRO6000.28V", (1, 2, 4, 8), ("FIN-03", "ICE-01"), "AMD Turin", None, "pcie"),
    GPUFamily("RTX A6000", "RTX A6000 48GB", "RTX-A6000", 48, Decimal("0.79"), 10, 60,
              "1A6000.10V", (1, 2, 4, 8), ("FIN-01",), "AMD Milan", "50GB/s", "pcie"),
    GPUFamily("Tesla V100", "Tesla V100 16GB", "V100", 16, Decimal("0.39"), 6, 23, "1V100.6V",
              (1,), ("FIN-01",), "Intel Xeon Gold", None, None, fixed_disk_gb=225),
)  # fmt: skip

# CPU nodes: Verda lists them, and shows them in stock, but no order can ask for one.
CPU_TYPES: tuple[dict[str, Any], ...] = tuple(
    {
        "id": str(uuid.uuid5(_NS, sku)),
        "instance_type": sku,
        "model": "CPU Node",
        "name": "AMD EPYC",
        "display_name": "Rome/Milan",
        "manufacturer": "AMD",
        "description": "Dedicated Hardware Instance",
        "best_for": ["Data processing", "Web services"],
        "deploy_warning": None,
        "cpu": {"description": f"{cores} CPU", "number_of_cores": cores},
        "gpu": {"description": "", "number_of_gpus": 0},
        "gpu_memory": {"description": "", "size_in_gigabytes": 0},
        "memory": {"description": f"{ram}GB RAM", "size_in_gigabytes": ram},
        "storage": {"description": "dynamic"},
        "p2p": None,
        "price_per_hour": price,
        "spot_price": spot,
        "dynamic_price": price,
        "max_dynamic_price": price,
        "serverless_price": price,
        "serverless_spot_price": spot,
        "currency": "usd",
        "supported_os": ["ubuntu-22.04", "ubuntu-24.04"],
    }
    for sku, cores, ram, price, spot in (
        ("CPU.4V.16G", 4, 16, "0.14", "0.05"),
        ("CPU.32V.128G", 32, 128, "1.10", "0.40"),
    )
)
CPU_LOCATIONS = ("FIN-01", "ICE-01")


def _sku(family: GPUFamily, count: int) -> str:
    """`1H100.80S.30V` with 8 GPUs is `8H100.80S.176V`: the count, then vCPUs scaled."""
    parts = family.sku[1:].split(".")
    vcpus = _vcpus(family, count)
    return f"{count}{'.'.join([*parts[:-1], f'{vcpus}V'])}"


def _vcpus(family: GPUFamily, count: int) -> int:
    # Verda caps the 4x and 8x SXM boxes below a linear scale (8H100.80S.176V, 8H200.141S.176V).
    if family.model in ("H100", "H200") and count >= 4:
        return 176
    if family.model == "A100" and count == 8:
        return 176
    return family.vcpus * count


def _money(value: Decimal) -> str:
    return str(value.quantize(_CENT))


def instance_type_json(family: GPUFamily, count: int) -> dict[str, Any]:
    """The `GET /v1/instance-types` element for `count` GPUs of this family."""
    sku = _sku(family, count)
    price = family.price * count
    vcpus = _vcpus(family, count)
    ram = family.ram_gb * count
    storage: dict[str, Any] = {"description": "dynamic"}
    if family.fixed_disk_gb is not None:
        storage = {
            "description": f"{family.fixed_disk_gb}GB NVME",
            "size_in_gigabytes": family.fixed_disk_gb,
        }
    return {
        "id": str(uuid.uuid5(_NS, sku)),
        "instance_type": sku,
        "model": family.model,
        "name": family.label,
        "display_name": f"NVIDIA {family.label}",
        "manufacturer": "NVIDIA",
        "description": "Dedicated Hardware Instance",
        "best_for": ["Large model training", "Inference"],
        "deploy_warning": (
            f"{family.model}: use an image with NVIDIA driver 570 or higher"
            if family.gpu_model in ("B300", "B200", "RTX-PRO-6000")
            else None
        ),
        "cpu": {
            "description": f"{vcpus} CPU",
            "number_of_cores": vcpus,
            "model": family.cpu_model,
        },
        "gpu": {"description": f"{count}x {family.label}", "number_of_gpus": count},
        "gpu_memory": {
            "description": f"{family.memory_gb * count}GB GPU RAM",
            "size_in_gigabytes": family.memory_gb * count,
        },
        "memory": {"description": f"{ram}GB RAM", "size_in_gigabytes": ram},
        "storage": storage,
        "p2p": family.p2p if count > 1 else None,
        "price_per_hour": _money(price),
        "spot_price": _money(price * Decimal("0.45")),
        "dynamic_price": _money(price * Decimal("0.60")),
        "max_dynamic_price": _money(price * Decimal("1.60")),
        "serverless_price": _money(price * Decimal("0.55")),
        "serverless_spot_price": _money(price * Decimal("0.28")),
        "currency": "usd",
        "supported_os": ["ubuntu-22.04", "ubuntu-24.04"],
    }


def build_catalog() -> tuple[tuple[CatalogEntry, ...], dict[str, dict[str, Any]]]:
    """Every (type, location) the simulator can deploy, and every GPU type's JSON by name."""
    entries: list[CatalogEntry] = []
    types: dict[str, dict[str, Any]] = {}
    for family in FAMILIES:
        for count in family.counts:
            data = instance_type_json(family, count)
            types[data["instance_type"]] = data
            for location in family.locations:
                entries.append(
                    CatalogEntry(
                        sku=data["instance_type"],
                        region=location,
                        gpu_model=family.gpu_model,
                        gpu_count=count,
                        price_per_hour=Decimal(data["price_per_hour"]),
                        vcpus=data["cpu"]["number_of_cores"],
                        ram_gb=data["memory"]["size_in_gigabytes"],
                        disk_gb=family.fixed_disk_gb or DEFAULT_OS_VOLUME_GB,
                        interconnect=family.interconnect,
                        details={
                            key: data[key]
                            for key in ("model", "name", "cpu", "gpu", "gpu_memory", "memory")
                        }
                        | {"storage": data["storage"]},
                    )
                )
    return tuple(entries), types


CATALOG_ENTRIES, GPU_TYPES = build_catalog()
ALL_TYPES: dict[str, dict[str, Any]] = GPU_TYPES | {t["instance_type"]: t for t in CPU_TYPES}


# `GET /v1/volume-types`, as Verda answers it: NVMe's price is verda.md's example; the cluster
# types' prices and every speed are guesses (Verda publishes no figures for them).
def _volume_type(kind: str, per_month: str, shared: bool, burst: int, speed: int) -> dict[str, Any]:
    per_gb_second = Decimal(per_month) / (730 * 3600)
    return {
        "type": kind,
        "price": {
            "price_per_month_per_gb": float(per_month),
            "cps_per_gb": float(per_gb_second.quantize(Decimal("1e-13"))),
            "currency": "usd",
        },
        "is_shared_fs": shared,
        "burst_bandwidth": burst,
        "continuous_bandwidth": burst // 2,
        "internal_network_speed": speed,
        "iops": f"{burst * 100}",
        "throughput_gbps": burst / 1000,
    }


VOLUME_TYPES: tuple[dict[str, Any], ...] = (
    _volume_type("NVMe", "0.2", False, 2000, 100),
    _volume_type("HDD", "0.05", False, 500, 25),
    _volume_type("NVMe_Shared", "0.25", True, 2000, 100),
    _volume_type("NVMe_Shared_Cluster", "0.3", True, 4000, 400),
    _volume_type("NVMe_OS_Cluster", "0.2", False, 2000, 400),
)
VOLUME_PRICES: dict[str, Decimal] = {
    t["type"]: Decimal(str(t["price"]["price_per_month_per_gb"])) for t in VOLUME_TYPES
}
