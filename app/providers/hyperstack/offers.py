"""Hyperstack flavors x stocks x pricebook -> normalized offers."""

import logging
from decimal import Decimal
from typing import Any

from app.catalogue import Interconnect, Provider
from app.providers.base import Offer
from app.providers.http import wire_decimal

log = logging.getLogger(__name__)

# Hyperstack's flavor `gpu` names -> (catalogue model, interconnect).
GPU_NAMES: dict[str, tuple[str, Interconnect]] = {
    "B300-SXM": ("B300", Interconnect.SXM),
    "B200-SXM": ("B200", Interconnect.SXM),
    "H200-141G-SXM5": ("H200", Interconnect.SXM),
    "H100-80G-SXM5": ("H100", Interconnect.SXM),
    "H100-80G-PCIe-NVLink": ("H100", Interconnect.NVLINK),
    "H100-80G-PCIe": ("H100", Interconnect.PCIE),
    "A100-80G-SXM4": ("A100-80G", Interconnect.SXM),
    "A100-80G-PCIe-NVLink": ("A100-80G", Interconnect.NVLINK),
    "A100-80G-PCIe": ("A100-80G", Interconnect.PCIE),
    "RTX-PRO6000-SE": ("RTX-PRO-6000", Interconnect.PCIE),
    "L40S": ("L40S", Interconnect.PCIE),
    "L40": ("L40", Interconnect.PCIE),
    "RTX-A6000-ada": ("RTX-6000-ADA", Interconnect.PCIE),
    "RTX-A6000": ("RTX-A6000", Interconnect.PCIE),
    "RTX-A5000": ("RTX-A5000", Interconnect.PCIE),
    "RTX-A4000": ("RTX-A4000", Interconnect.PCIE),
    "A40": ("A40", Interconnect.PCIE),
}


def parse_prices(body: Any) -> dict[str, Decimal]:
    """`GET /pricebook` (a bare array) -> hourly price per resource name."""
    rows = body if isinstance(body, list) else []
    prices = {}
    for row in rows:
        if isinstance(row, dict) and isinstance(row.get("name"), str):
            price = wire_decimal(row.get("value"))
            if price is not None and price > 0:
                prices[row["name"]] = price
    return prices


def parse_slots(body: Any) -> dict[tuple[str, str, str], int]:
    """`GET /core/stocks` -> deployable slots per (region, GPU name, "<n>x")."""
    slots = {}
    stocks = body.get("stocks") if isinstance(body, dict) else None
    for region in stocks if isinstance(stocks, list) else []:
        if not isinstance(region, dict) or not isinstance(region.get("models"), list):
            continue
        for model in region["models"]:
            configurations = model.get("configurations") if isinstance(model, dict) else None
            if not isinstance(configurations, dict):
                continue
            for size, count in configurations.items():
                if isinstance(count, int) and not isinstance(count, bool):
                    slots[(str(region.get("region")), str(model.get("model")), size)] = count
    return slots


def flavor_rows(body: Any) -> list[dict[str, Any]] | None:
    """`GET /core/flavors` -> its flavors, flattened; None if the shape is not the known one."""
    groups = body.get("data") if isinstance(body, dict) else None
    if not isinstance(groups, list):
        return None
    rows = []
    for group in groups:
        flavors = group.get("flavors") if isinstance(group, dict) else None
        for flavor in flavors if isinstance(flavors, list) else []:
            if isinstance(flavor, dict):
                rows.append({"region_name": group.get("region_name"), **flavor})
    return rows


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def to_offer(
    flavor: dict[str, Any],
    prices: dict[str, Decimal],
    slots: dict[tuple[str, str, str], int],
) -> Offer | None:
    """One flavor as an offer, or None when it is not a GPU VM for sale right now."""
    name, region, gpu = flavor.get("name"), flavor.get("region_name"), flavor.get("gpu")
    count = _int(flavor.get("gpu_count"))
    if not (isinstance(name, str) and isinstance(region, str) and isinstance(gpu, str)):
        return None
    if not gpu or not count or count < 1 or name.endswith("k8s"):
        return None  # CPU-only and Kubernetes-cluster flavors are not plain GPU VMs
    if flavor.get("stock_available") is not True:
        return None
    mapped = GPU_NAMES.get(gpu)
    if mapped is None:
        log.debug("hyperstack: flavor %s has GPU %r that the catalogue does not know", name, gpu)
        return None
    price = prices.get(gpu)
    if price is None:
        log.debug("hyperstack: GPU %r has no pricebook row: %s is not offered", gpu, name)
        return None
    slot_count = slots.get((region, gpu, f"{count}x"))
    return Offer(
        provider=Provider.HYPERSTACK,
        region=region,
        sku=name,
        gpu_model=mapped[0],
        gpu_count=count,
        price_per_hour=price * count,
        interconnect=mapped[1],
        vcpus=_int(flavor.get("cpu")),
        ram_gb=_int(flavor.get("ram")),
        disk_gb=_int(flavor.get("disk")),
        disk_fixed=True,
        available=slot_count if slot_count else None,
    )
