"""Hyperstack's JSON turned into the service's types: flavors x stocks x pricebook -> offers,
instances -> VMs, and the environments, key pairs and credit the adapter needs. Pure functions,
no I/O; an answer whose shape is unusable is `Unavailable`."""

import logging
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from app.core.catalogue import Interconnect, Provider
from app.core.market import FORECAST_TEXT_LIMIT
from app.core.text import storable
from app.providers.base import VM, Offer, StockForecast, Unavailable, VMState
from app.providers.http import wire_decimal

log = logging.getLogger(__name__)

PROVIDER = Provider("hyperstack")
STATES = {
    "CREATING": VMState.PENDING,
    "BUILD": VMState.PENDING,
    "ACTIVE": VMState.RUNNING,
    "ERROR": VMState.FAILED,
    "SHUTOFF": VMState.STOPPED,
    "HIBERNATED": VMState.STOPPED,
    "SUSPENDED": VMState.SUSPENDED,
    "DELETING": VMState.DELETING,
    "DELETED": VMState.GONE,
}

# The pricebook's row for a public IP, per IP per hour; CoCalc adds it to a GPU flavor's price
# (hyperstack.md §3). Every VM we make has one; without the row Hyperstack prices none.
PUBLIC_IP_ROW = "PublicIP"

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


def price_list(body: Any) -> dict[str, Decimal]:
    """`GET /pricebook` (a bare array) -> hourly price per resource name (a GPU's per GPU)."""
    if not isinstance(body, list):
        raise Unavailable(PROVIDER, "GET /pricebook answered with no price list")
    prices = {}
    for row in body:
        if isinstance(row, dict) and isinstance(row.get("name"), str):
            price = wire_decimal(row.get("value"))
            if price is not None and price > 0:
                prices[row["name"]] = price
    return prices


def stock_slots(body: Any) -> dict[tuple[str, str, str], int]:
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


def forecasts(body: Any) -> list[StockForecast]:
    """`GET /core/stocks` -> what Hyperstack plans per region and GPU model it names with a
    catalogue model, where it says anything (`planned_7_days`, `planned_30_days`)."""
    found = []
    stocks = body.get("stocks") if isinstance(body, dict) else None
    for region in stocks if isinstance(stocks, list) else []:
        if not isinstance(region, dict) or not isinstance(region.get("region"), str):
            continue
        models = region.get("models")
        for model in models if isinstance(models, list) else []:
            gpu = model.get("model") if isinstance(model, dict) else None
            if not isinstance(gpu, str) or gpu not in GPU_NAMES:
                continue  # a GPU the catalogue does not know: nothing anyone could order
            week = _planned(model.get("planned_7_days"))
            month = _planned(model.get("planned_30_days"))
            if week is not None or month is not None:
                mapped = GPU_NAMES[gpu]
                found.append(StockForecast(PROVIDER, region["region"], gpu, *mapped, week, month))
    return found


def _planned(value: Any) -> str | None:
    """A `planned_*` value as Hyperstack wrote it ("10+", or a string no one has seen yet);
    null, empty or not text: nothing said. A whole number is taken as its digits."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        return None
    return storable(value)[:FORECAST_TEXT_LIMIT]


def flavor_rows(body: Any) -> list[dict[str, Any]]:
    """`GET /core/flavors` -> its flavors, flattened, each with its `region_name`."""
    groups = body.get("data") if isinstance(body, dict) else None
    if not isinstance(groups, list):
        raise Unavailable(PROVIDER, "GET /core/flavors answered with no flavor list")
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
    # Every VM we create has a floating IP, which the pricebook prices apart (PUBLIC_IP_ROW).
    public_ip = prices.get(PUBLIC_IP_ROW, Decimal(0))
    slot_count = slots.get((region, gpu, f"{count}x"))
    return Offer(
        provider=PROVIDER,
        region=region,
        sku=name,
        gpu_model=mapped[0],
        gpu_count=count,
        price_per_hour=price * count + public_ip,
        interconnect=mapped[1],
        vcpus=_int(flavor.get("cpu")),
        ram_gb=_int(flavor.get("ram")),
        disk_gb=_int(flavor.get("disk")),
        disk_fixed=True,
        available=slot_count if slot_count else None,
    )


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def to_vm(instance: Any) -> VM | None:
    """A Hyperstack `InstanceFields` object as a VM; None if it has no usable id."""
    if not isinstance(instance, dict):
        return None
    raw_id = instance.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, int | str) or not str(raw_id).isdigit():
        return None
    status = instance.get("status")
    status = status if isinstance(status, str) else ""
    environment, flavor = instance.get("environment"), instance.get("flavor")
    region = environment.get("region") if isinstance(environment, dict) else None
    sku = flavor.get("name") if isinstance(flavor, dict) else None
    ip, name, labels = instance.get("floating_ip"), instance.get("name"), instance.get("labels")
    return VM(
        provider=PROVIDER,
        id=str(raw_id),
        state=STATES.get(status.upper(), VMState.UNKNOWN),
        provider_status=status,
        name=name if isinstance(name, str) else None,
        region=region if isinstance(region, str) else None,
        sku=sku if isinstance(sku, str) else None,
        ip=ip if isinstance(ip, str) and ip else None,
        created_at=_timestamp(instance.get("created_at")),
        tags=tuple(t for t in labels if isinstance(t, str)) if isinstance(labels, list) else (),
    )


def created_vm(body: Any) -> VM | None:
    """`POST /core/virtual-machines` -> the one VM it made; None if the answer names none."""
    instances = body.get("instances") if isinstance(body, dict) else None
    return to_vm(instances[0]) if isinstance(instances, list) and instances else None


def instance(body: Any) -> VM:
    """`GET /core/virtual-machines/{id}` -> the VM."""
    vm = to_vm(body.get("instance") if isinstance(body, dict) else None)
    if vm is None:
        raise Unavailable(PROVIDER, "GET /core/virtual-machines/{id} answered with no instance")
    return vm


def listed(body: Any, key: str) -> list[dict[str, Any]]:
    """The objects of a list answer (`{"instances": [...]}`, `{"keypairs": [...]}`...)."""
    found = body.get(key) if isinstance(body, dict) else None
    if not isinstance(found, list):
        raise Unavailable(PROVIDER, f"answer with no {key} list")
    return [row for row in found if isinstance(row, dict)]


def gpu_regions(rows: list[dict[str, Any]]) -> list[str]:
    """The regions of the flavors that are plain GPU VMs (in stock or not), sorted."""
    found = set()
    for row in rows:
        region, gpu, count = row.get("region_name"), row.get("gpu"), _int(row.get("gpu_count"))
        name = str(row.get("name", ""))
        if isinstance(region, str) and gpu and count and count > 0 and not name.endswith("k8s"):
            found.add(region)
    return sorted(found)


def image_names(body: Any) -> set[str]:
    """`GET /core/images` -> the names of the images it lists, whatever their region group."""
    names = set()
    for group in listed(body, "images"):
        for image in group.get("images") or []:
            if isinstance(image, dict) and isinstance(image.get("name"), str):
                names.add(image["name"])
    return names


def environment_region(body: Any, name: str) -> str | None:
    """`GET /core/environments?search=` -> the region of the environment called `name`."""
    found = [e for e in listed(body, "environments") if e.get("name") == name]
    return str(found[0].get("region")) if found else None


def keypairs_named(body: Any, name: str) -> list[dict[str, Any]]:
    """`GET /core/keypairs?search=` -> the key pairs called exactly `name`."""
    return [k for k in listed(body, "keypairs") if k.get("name") == name]


def keypair_environment(keypair: dict[str, Any]) -> str | None:
    """The name of the environment a key pair belongs to."""
    environment = keypair.get("environment")
    if isinstance(environment, dict):
        name = environment.get("name")
        return name if isinstance(name, str) else None
    return environment if isinstance(environment, str) else None


def keypair_public_key(keypairs: list[dict[str, Any]]) -> str | None:
    """The public key of the first of these key pairs that shows one."""
    return next((k["public_key"] for k in keypairs if isinstance(k.get("public_key"), str)), None)


def credit(body: Any) -> Decimal:
    """`GET /billing/user-credit/credit` -> the account's credit in USD."""
    data = body.get("data") if isinstance(body, dict) else None
    amount = wire_decimal(data.get("credit") if isinstance(data, dict) else None)
    if amount is None:
        raise Unavailable(PROVIDER, "GET /billing/user-credit/credit answered with no credit")
    return amount


def cannot_pay(body: Any, price_per_hour: Decimal) -> bool:
    """Whether the credit answer says the account cannot start a machine at this price."""
    data = body.get("data") if isinstance(body, dict) else None
    data = data if isinstance(data, dict) else {}
    amount = wire_decimal(data.get("credit")) or Decimal(0)
    return data.get("can_create_instance") is False or amount < price_per_hour
