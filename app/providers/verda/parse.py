"""Verda's JSON (instance types, availability, instances, keys, balance) turned into
the service's types: pure functions, no I/O. An answer whose shape is unusable is `Unavailable`."""

import json
import logging
import re
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

from app.core.catalogue import Interconnect, Provider
from app.core.drivers import cuda_floor
from app.providers.base import VM, Image, Offer, Rejected, Unavailable, VMState
from app.providers.http import wire_decimal

logger = logging.getLogger(__name__)
T = TypeVar("T")

PROVIDER = Provider("verda")
TAG_KEY = "autoprovision"
OS_VOLUME_TYPE = "NVMe"  # what Verda creates an OS volume as
SHARED_VOLUME_TYPE = "NVMe_Shared_Cluster"  # a cluster's shared volume: a type of its own
# Verda prices volumes per GB-month and does not say how many hours it counts in a month:
# 730 (365 x 24 / 12) is the usual cloud convention.
HOURS_PER_MONTH = Decimal(730)
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{7,127}$")

# Verda's `model` (or the name in `gpu.description`), upper-cased without spaces or dashes.
_MODELS = {
    "GB300": "GB300",
    "B300": "B300",
    "GB200": "GB200",
    "B200": "B200",
    "GH200": "GH200",
    "H200": "H200",
    "H100": "H100",
    "L40S": "L40S",
    "L40": "L40",
    "A40": "A40",
    "RTXPRO6000": "RTX-PRO-6000",
    "RTX6000ADA": "RTX-6000-ADA",
    "RTXA6000": "RTX-A6000",
    "A6000": "RTX-A6000",
    "RTXA5000": "RTX-A5000",
    "A5000": "RTX-A5000",
    "RTXA4000": "RTX-A4000",
    "A4000": "RTX-A4000",
    "TESLAV100": "V100",
    "V100": "V100",
    "MI300X": "MI300X",
}
_SXM_MODELS = frozenset({"B300", "B200", "GB300", "GB200"})
PCIE_MODELS = frozenset(
    {"L40S", "L40", "A40", "RTX-PRO-6000", "RTX-6000-ADA", "RTX-A6000", "RTX-A5000", "RTX-A4000"}
)
_SXM_SKU = re.compile(r"\.\d+S\.")  # `1H100.80S.30V`: the S after the memory size is SXM
_FORM_FACTOR = re.compile(r"^(SXM\d*|PCIE|NVL|HGX)$", re.IGNORECASE)

STATES = {
    "new": VMState.PENDING,
    "ordered": VMState.PENDING,
    "validating": VMState.PENDING,
    "provisioning": VMState.PENDING,
    "running": VMState.RUNNING,
    "offline": VMState.STOPPED,
    "deleting": VMState.DELETING,
    "discontinued": VMState.GONE,
    "notfound": VMState.GONE,
    "error": VMState.FAILED,
    "no_capacity": VMState.FAILED,
    "installation_failed": VMState.FAILED,
}


def _key(text: str) -> str:
    return re.sub(r"[^A-Z0-9]", "", text.upper())


def as_int(value: Any) -> int | None:
    """An integer from JSON (not a bool), or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def as_dict(value: Any) -> dict[str, Any]:
    """`value` if it is an object, else an empty one."""
    return value if isinstance(value, dict) else {}


def gpu_model(model: Any, description: Any, count: int, total_memory: int | None) -> str | None:
    """The catalogue name for Verda's `model` (falling back on `gpu.description`)."""
    names = [model] if isinstance(model, str) else []
    if isinstance(description, str):
        # "8x H100 SXM5 80GB" -> "H100": drop the count, the memory and the form factor
        words = [w for w in description.split()[1:] if not re.fullmatch(r"\d+GB", w)]
        names.append(" ".join(w for w in words if not _FORM_FACTOR.match(w)))
    for name in names:
        key = _key(name)
        if key == "A100":
            per_gpu = total_memory // count if total_memory else 0
            return "A100-80G" if per_gpu >= 60 else "A100-40G" if per_gpu > 0 else None
        if key in _MODELS:
            return _MODELS[key]
    return None


def interconnect(sku: str, model: str, data: dict[str, Any]) -> Interconnect | None:
    """SXM for SXM types (named so, `.80S.`-style names, HGX Blackwell); PCIe for PCIe cards."""
    names = " ".join(
        str(v) for v in (data.get("name"), as_dict(data.get("gpu")).get("description")) if v
    )
    if model in _SXM_MODELS or _SXM_SKU.search(sku) or "SXM" in names.upper():
        return Interconnect.SXM
    if model in PCIE_MODELS:
        return Interconnect.PCIE
    return None


def volume_price(body: Any, kind: str = OS_VOLUME_TYPE) -> Decimal | None:
    """`GET /volume-types` -> USD per GB per hour of a volume of `kind` (NVMe, an OS volume,
    by default); None if not priced."""
    if not isinstance(body, list):
        raise Unavailable(PROVIDER, "/volume-types did not answer a list")
    for entry in body:
        if isinstance(entry, dict) and entry.get("type") == kind:
            price = as_dict(entry.get("price"))
            per_month = wire_decimal(price.get("price_per_month_per_gb"))
            if per_month is None or per_month < 0 or str(price.get("currency", "usd")) != "usd":
                return None
            return per_month / HOURS_PER_MONTH
    return None


def priced_model(data: dict[str, Any], gpus: int) -> tuple[str, Decimal] | None:
    """The GPU model and USD price of an instance or cluster type with `gpus` GPUs in all;
    None when the model is not one we know or the price is not a positive USD amount."""
    gpu = as_dict(data.get("gpu"))
    model = gpu_model(
        data.get("model"),
        gpu.get("description"),
        gpus,
        as_int(as_dict(data.get("gpu_memory")).get("size_in_gigabytes")),
    )
    price = wire_decimal(data.get("price_per_hour"))
    currency = str(data.get("currency") or "usd").lower()
    if model is None or price is None or price <= 0 or currency != "usd":
        return None
    return model, price


def offer(
    data: dict[str, Any], region: str, disk_price_per_gb_hour: Decimal = Decimal(0)
) -> Offer | None:
    """An on-demand `Offer` for one instance type in one location, or None if not a GPU we know.

    `disk_price_per_gb_hour` prices the OS volume of types whose disk is sized at deploy time.
    """
    sku = data.get("instance_type")
    count = as_int(as_dict(data.get("gpu")).get("number_of_gpus"))
    if not isinstance(sku, str) or not count or count < 1:
        return None
    priced = priced_model(data, count)
    if priced is None:
        logger.debug("verda: leaving out %s in %s (model %r)", sku, region, data.get("model"))
        return None
    model, price = priced
    disk = as_int(as_dict(data.get("storage")).get("size_in_gigabytes"))
    return Offer(
        provider=PROVIDER,
        region=region,
        sku=sku,
        gpu_model=model,
        gpu_count=count,
        price_per_hour=price,
        interconnect=interconnect(sku, model, data),
        vcpus=as_int(as_dict(data.get("cpu")).get("number_of_cores")),
        ram_gb=as_int(as_dict(data.get("memory")).get("size_in_gigabytes")),
        disk_gb=disk,
        disk_fixed=disk is not None,  # else Verda sizes the OS volume at deploy time
        disk_price_per_gb_hour=Decimal(0) if disk is not None else disk_price_per_gb_hour,
    )


def accepted_vm(vm_id: str, *, name: str, offer: Offer, tag: str) -> VM:
    """The VM (or cluster) of a create Verda accepted just now: `ordered`, as its answer says."""
    return VM(
        provider=PROVIDER,
        id=vm_id,
        state=VMState.PENDING,
        provider_status="ordered",
        name=name,
        region=offer.region,
        sku=offer.sku,
        tags=(tag,),
    )


def after_refused_delete(current: VM | None, what: str, status_code: int | None) -> None:
    """Verda refused to delete `what` (an instance or a cluster), now `current`: fine when it
    is gone or going, retry-later while it is still being made, else the refusal stands."""
    if current is None or current.state in (VMState.GONE, VMState.DELETING):
        return
    if current.state is VMState.PENDING:
        raise Unavailable(PROVIDER, f"{what} is still {current.provider_status}: delete later")
    raise Rejected(
        PROVIDER, f"delete of {what} ({current.provider_status}) refused", status_code=status_code
    )


def vm(data: Any) -> VM | None:
    """A `VM` from Verda's Instance object; None if it lacks an id."""
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
        return None
    status = data.get("status")
    status = status if isinstance(status, str) else "unknown"
    return VM(
        provider=PROVIDER,
        id=data["id"],
        state=STATES.get(status, VMState.UNKNOWN),
        provider_status=status,
        name=nonempty_str(data.get("hostname")),
        region=nonempty_str(data.get("location")),
        sku=nonempty_str(data.get("instance_type")),
        ip=nonempty_str(data.get("ip")),
        created_at=timestamp(data.get("created_at")),
        tags=_tags(data.get("tags")),
    )


def nonempty_str(value: Any) -> str | None:
    """`value` if it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def timestamp(value: Any) -> datetime | None:
    """Verda's ISO 8601 time (`Z` or an offset), or None if it is not one."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _tags(value: Any) -> tuple[str, ...]:
    """Our own tag as given at create (the `autoprovision` value); others as `key=value`."""
    tags: list[str] = []
    for tag in value if isinstance(value, list) else []:
        if not isinstance(tag, dict) or not isinstance(tag.get("key"), str):
            continue
        key, val = tag["key"], tag.get("value")
        if key == TAG_KEY and isinstance(val, str):
            tags.append(val)
        else:
            tags.append(key if val is None else f"{key}={val}")
    return tuple(tags)


def is_id(value: str) -> bool:
    """Whether `value` has the shape of a Verda id (instances and SSH keys)."""
    return bool(_ID.match(value))


def created_id(text: str) -> str | None:
    """The id in a create answer: bare text, maybe quoted, maybe `{"id": ...}`."""
    value = text.strip().strip('"').strip()
    if is_id(value):
        return value
    body = json_or_none(text)
    candidate = body.get("id") if isinstance(body, dict) else None
    return candidate if isinstance(candidate, str) and is_id(candidate) else None


def json_or_none(text: str) -> Any:
    """The text as JSON, or None if it is not JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return None


def types_by_name(body: Any, key: str, path: str) -> dict[str, dict[str, Any]]:
    """A list of types (`/instance-types`, `/cluster-types`) -> each one by its `key` name."""
    if not isinstance(body, list):
        raise Unavailable(PROVIDER, f"{path} did not answer a list")
    return {t[key]: t for t in body if isinstance(t, dict) and isinstance(t.get(key), str)}


def instance_types(body: Any) -> dict[str, dict[str, Any]]:
    """`GET /instance-types` -> each instance type's object by its name."""
    return types_by_name(body, "instance_type", "/instance-types")


def availability(body: Any, path: str = "/instance-availability") -> list[tuple[str, str]]:
    """`GET /instance-availability` (or `/cluster-availability`) -> (type, location) pairs in
    stock."""
    if not isinstance(body, list):
        raise Unavailable(PROVIDER, f"{path} did not answer a list")
    return [
        (sku, loc["location_code"])
        for loc in body
        if isinstance(loc, dict) and isinstance(loc.get("location_code"), str)
        for sku in as_list(loc.get("availabilities"))
        if isinstance(sku, str)
    ]


def one(read: Callable[[Any], T | None], body: Any, what: str) -> T:
    """One object's answer read by `read`; an answer it cannot read is a failed read."""
    found = read(body)
    if found is None:
        raise Unavailable(PROVIDER, f"{what}: answer without an id")
    return found


def many(read: Callable[[Any], T | None], body: Any, path: str) -> list[T]:
    """A list's answer read entry by entry by `read`, entries without an id left out."""
    if not isinstance(body, list):
        raise Unavailable(PROVIDER, f"{path} did not answer a list")
    return [found for found in (read(item) for item in body) if found is not None]


def instance(body: Any, vm_id: str) -> VM:
    """`GET /instances/{id}` -> the VM."""
    return one(vm, body, f"instance {vm_id}")


def instances(body: Any) -> list[VM]:
    """`GET /instances` -> its VMs (entries without an id left out)."""
    return many(vm, body, "/instances")


def ssh_key_id(body: Any, public_key: str) -> str | None:
    """`GET /ssh-keys` -> the id of the key with this type and body (the comment may differ)."""
    wanted = key_material(public_key)
    for key in body if isinstance(body, list) else []:
        if (
            isinstance(key, dict)
            and isinstance(key.get("id"), str)
            and key_material(str(key.get("key", ""))) == wanted
        ):
            return str(key["id"])
    return None


def key_material(public_key: str) -> str:
    """An OpenSSH public key's type and body, without its comment."""
    return " ".join(public_key.split()[:2])


def balance(body: Any) -> Decimal:
    """`GET /balance` -> the amount (in the project's billing currency, normally USD)."""
    amount = wire_decimal(body.get("amount") if isinstance(body, dict) else None)
    if amount is None:
        raise Unavailable(PROVIDER, "/balance answered without an amount")
    if isinstance(body, dict) and str(body.get("currency", "usd")).lower() != "usd":
        logger.warning("verda: the balance is in %s, not usd", body.get("currency"))
    return amount


def image_match(body: Any, image: str) -> str | None:
    """`GET /images` -> how it lists `image` ("image type" or "id"), or None if it does not."""
    for row in as_list(body):
        if isinstance(row, dict) and row.get("image_type") == image:
            return "image type"
        if isinstance(row, dict) and row.get("id") == image:
            return "id"
    return None


_DRIVER = re.compile(r"\bdriver\s+(\d{3})\b", re.IGNORECASE)


def image_driver(row: dict[str, Any]) -> int | None:
    """An `Os` row's NVIDIA driver branch: as its `details` name it ("NVIDIA open driver 580"),
    else the oldest the CUDA version in its details or image type implies ("CUDA 12.4": 550);
    None when it names neither (the minimal image)."""
    details = [d for d in as_list(row.get("details")) if isinstance(d, str)]
    for detail in details:
        found = _DRIVER.search(detail)
        if found is not None:
            return int(found[1])
    floors = [cuda_floor(text) for text in (*details, str(row.get("image_type") or ""))]
    known = [floor for floor in floors if floor is not None]
    return max(known) if known else None


def images(body: Any, *, cluster: bool = False) -> list[Image]:
    """`GET /images` (or `/images/cluster`) -> each image by its image type (what a create
    sends), its id as another name, and its driver branch."""
    found = []
    for row in as_list(body):
        if isinstance(row, dict) and isinstance(row.get("image_type"), str):
            ids = {row["id"]} if isinstance(row.get("id"), str) else set()
            found.append(
                Image(
                    name=row["image_type"],
                    driver=image_driver(row),
                    aliases=frozenset(ids - {row["image_type"]}),
                    cluster=cluster,
                    default=row.get("is_default") is True,
                )
            )
    return found


def as_list(value: Any) -> list[Any]:
    """`value` if it is a list, else an empty one."""
    return value if isinstance(value, list) else []
