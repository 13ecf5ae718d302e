"""QuantaCloud's simulated catalogue: GPU slugs x counts x regions, priced per whole box.

Prices are late-2026 market levels; the RTX PRO 6000 1x/2x prices are the ones the reference
quotes from the live API ($2.39/h and $4.79/h in us-east-1).
"""

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from app.simulators.vms import CatalogEntry

CENT = Decimal("0.01")


@dataclass(frozen=True)
class Region:
    """A QuantaCloud region and the `regionInfo` the offers carry for it."""

    name: str
    city_state: str
    price_factor: Decimal


REGIONS = {
    r.name: r
    for r in (
        Region("us-east-1", "Virginia", Decimal("1.00")),
        Region("us-midwest-1", "Illinois", Decimal("0.97")),
        Region("us-midwest-4", "Ohio", Decimal("0.95")),
    )
}


@dataclass(frozen=True)
class GPUKind:
    """One GPU slug as QuantaCloud sells it, with per-GPU price and box specs."""

    slug: str
    gpu_model: str  # app.core.catalogue.GPU_MODELS
    name: str
    vram_gb: int
    architecture: str
    family: str
    price_per_gpu: Decimal
    vcpus_per_gpu: int
    ram_per_gpu: int
    disk_per_gpu: int
    regions: tuple[str, ...]
    counts: tuple[int, ...] = (1, 2, 4, 8)

    @property
    def sxm(self) -> bool:
        """Whether the GPUs sit on an SXM board (NVLink between them)."""
        return "-sxm" in self.slug


KINDS = (
    GPUKind("b300-sxm", "B300", "NVIDIA B300", 288, "Blackwell", "b300", Decimal("5.69"),
            28, 256, 1000, ("us-east-1", "us-midwest-4")),
    GPUKind("b200-sxm", "B200", "NVIDIA B200", 180, "Blackwell", "b200", Decimal("4.49"),
            28, 224, 1000, ("us-east-1", "us-midwest-1")),
    GPUKind("h200-sxm", "H200", "NVIDIA H200", 141, "Hopper", "h200", Decimal("3.49"),
            24, 240, 900, ("us-east-1", "us-midwest-1", "us-midwest-4")),
    GPUKind("h100-sxm", "H100", "NVIDIA H100 80GB HBM3", 80, "Hopper", "h100", Decimal("2.59"),
            24, 200, 800, ("us-east-1", "us-midwest-1", "us-midwest-4")),
    GPUKind("h100-pcie", "H100", "NVIDIA H100 PCIe", 80, "Hopper", "h100", Decimal("2.19"),
            16, 180, 750, ("us-midwest-1",)),
    GPUKind("a100-80gb-sxm", "A100-80G", "NVIDIA A100 80GB SXM4", 80, "Ampere", "a100",
            Decimal("1.49"), 16, 120, 600, ("us-east-1", "us-midwest-4")),
    GPUKind("l40s", "L40S", "NVIDIA L40S", 48, "Ada Lovelace", "l40s", Decimal("0.99"),
            12, 96, 500, ("us-east-1", "us-midwest-1")),
    GPUKind("rtx-pro-6000-blackwell", "RTX-PRO-6000", "NVIDIA RTX PRO 6000 Blackwell", 96,
            "Blackwell", "rtx-pro-6000", Decimal("2.39"), 16, 144, 725,
            ("us-east-1", "us-midwest-4")),
    # A MIG slice of the card above: its own slug, half the memory; never a whole GPU.
    GPUKind("rtx-pro-6000-blackwell-mig-48gb", "RTX-PRO-6000",
            "NVIDIA RTX PRO 6000 Blackwell (MIG 48GB)", 48, "Blackwell", "rtx-pro-6000",
            Decimal("1.25"), 8, 72, 360, ("us-east-1", "us-midwest-4"), (1, 2)),
    GPUKind("rtx-6000-ada", "RTX-6000-ADA", "NVIDIA RTX 6000 Ada", 48, "Ada Lovelace",
            "rtx-6000-ada", Decimal("0.79"), 12, 96, 500, ("us-midwest-1",)),
    GPUKind("rtx-a6000", "RTX-A6000", "NVIDIA RTX A6000", 48, "Ampere", "rtx-a6000",
            Decimal("0.49"), 8, 64, 400, ("us-midwest-4",)),
)  # fmt: skip

FAMILY_LABELS = {
    "b300": "B300",
    "b200": "B200",
    "h200": "H200",
    "h100": "H100",
    "a100": "A100",
    "l40s": "L40S",
    "rtx-pro-6000": "RTX PRO 6000",
    "rtx-6000-ada": "RTX 6000 Ada",
    "rtx-a6000": "RTX A6000",
}

# Whole-box prices the reference saw on the live API, where they differ from per-GPU x count.
PRICE_OVERRIDES = {("rtx-pro-6000-blackwell", 2, "us-east-1"): Decimal("4.79")}


def sku_for(slug: str, count: int) -> str:
    """The catalogue sku of a slug and count: `<slug>-x<count>`."""
    return f"{slug}-x{count}"


def box_price(kind: GPUKind, count: int, region: Region) -> Decimal:
    """The hourly price of a whole box, USD."""
    override = PRICE_OVERRIDES.get((kind.slug, count, region.name))
    if override is not None:
        return override
    return (kind.price_per_gpu * count * region.price_factor).quantize(CENT)


def build_entries() -> tuple[CatalogEntry, ...]:
    """Every (slug, count, region) QuantaCloud sells, as catalogue entries."""
    entries = []
    for kind in KINDS:
        for region_name in kind.regions:
            region = REGIONS[region_name]
            for count in kind.counts:
                nvlink = kind.sxm and count > 1
                entries.append(
                    CatalogEntry(
                        sku=sku_for(kind.slug, count),
                        region=region.name,
                        gpu_model=kind.gpu_model,
                        gpu_count=count,
                        price_per_hour=box_price(kind, count, region),
                        vcpus=kind.vcpus_per_gpu * count,
                        ram_gb=kind.ram_per_gpu * count,
                        disk_gb=kind.disk_per_gpu * count,
                        interconnect="sxm" if kind.sxm else "pcie",
                        details={"kind": kind, "nvlink": nvlink},
                    )
                )
    return tuple(entries)


def kind_of(entry: CatalogEntry) -> GPUKind:
    """The GPU kind a catalogue entry was built from."""
    kind: GPUKind = entry.details["kind"]
    return kind


def wire_number(value: Decimal) -> float:
    """A price as the API sends it: a JSON number (the live API sends floats)."""
    return float(value)


def offer_json(entry: CatalogEntry, offer_id: str) -> dict[str, Any]:
    """An offer object exactly as `GET /offers` shows it (shape of the reference's live capture)."""
    kind = kind_of(entry)
    region = REGIONS[entry.region]
    per_gpu = (entry.price_per_hour / entry.gpu_count).quantize(Decimal("0.0001")).normalize()
    nvlink = bool(entry.details["nvlink"])
    return {
        "id": offer_id,
        "provider": {"name": "QuantaCloud", "slug": "quantacloud", "maintenance": False},
        "gpu": {
            "name": kind.name,
            "slug": kind.slug,
            "vramGB": kind.vram_gb,
            "architecture": kind.architecture,
        },
        "gpuCount": entry.gpu_count,
        "region": entry.region,
        "regionInfo": {
            "countryCode": "US",
            "countryName": "United States",
            "cityState": region.city_state,
            "continent": "North America",
        },
        "priceHourly": wire_number(entry.price_per_hour),
        "pricePerGpu": wire_number(per_gpu),
        "isAvailable": True,
        "specs": {"vcpu": entry.vcpus, "ram": entry.ram_gb, "disk": entry.disk_gb},
        "storageCostPerGB": 0.0,
        "storageMinGB": entry.disk_gb,
        "storageMaxGB": entry.disk_gb,
        "costDataComplete": True,
        "deploymentType": "virtual",
        "nvlinkEnabled": nvlink,
        "interconnect": "nvlink" if nvlink else None,
    }


def per_gpu_price(entry: CatalogEntry) -> Decimal:
    """The offer's `pricePerGpu`, for sorting."""
    return entry.price_per_hour / entry.gpu_count
