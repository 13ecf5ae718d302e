"""QuantaCloud's JSON turned into the service's types: offers, deployments as VMs, SSH keys and
the balance. Pure functions, no I/O; the wire's names and values come from `facts`."""

import logging
import re
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, NamedTuple

from app.core.catalogue import Interconnect, Provider, normalize_gpu_model
from app.providers.base import VM, Offer, Unavailable, VMState
from app.providers.http import wire_decimal
from app.providers.quantacloud import facts

logger = logging.getLogger(__name__)

PROVIDER = Provider("quantacloud")
VM_STATES = {
    facts.PROVISIONING: VMState.PENDING,
    facts.CONNECTING: VMState.PENDING,
    facts.ACTIVE: VMState.RUNNING,
    facts.FAILED: VMState.FAILED,
    facts.INTERRUPTED: VMState.FAILED,
    facts.STOPPING: VMState.DELETING,
    facts.TERMINATED: VMState.GONE,
}
NOT_LIVE = (VMState.GONE, VMState.FAILED, VMState.DELETING)
# A region as offers spell it (`us-east-1`, `us-midwest-4`) [2H]: only such a value rules a
# deployment out.
REGION_TOKEN = re.compile(r"[a-z]+(-[a-z]+)*-[0-9]+")
MEMORY_TOLERANCE = Decimal("0.15")  # a card's memory may be reported in GiB, or net of reserves


class Slug(NamedTuple):
    """A GPU slug taken apart: its chip, and the form, memory and MIG marker it names."""

    chip: str
    form: str | None
    memory_gb: int | None
    mig: bool


class GpuKind(NamedTuple):
    """What a slug says of a GPU: the catalogue's model and the slug's form (`sxm`, ...)."""

    model: str
    form: str | None


def slug_parts(slug: str) -> Slug:
    """A slug's chip, form (`sxm5` reads as `sxm`), memory (`80gb`) and MIG marker, in any
    order: `h100-sxm-80gb` and `h100-80gb-sxm` are the same GPU."""
    form, memory, chip = None, None, []
    tokens = slug.strip().lower().split("-")
    for token in tokens:
        size = token.removesuffix(facts.MEMORY_SUFFIX)
        if token.rstrip("0123456789") in facts.FORMS:
            form = token.rstrip("0123456789")
        elif size != token and size.isdigit():
            memory = int(size)
        else:
            chip.append(token)
    return Slug("-".join(chip), form, memory, facts.MIG_MARKER in tokens)


def gpu_kind(slug: str, vram_gb: Any = None) -> GpuKind | None:
    """The GPU a slug names, in any of its spellings; None for a MIG slice (never a whole
    GPU), an unknown chip, or an A100 whose memory neither the slug nor `vram_gb` tells."""
    parts = slug_parts(slug)
    if parts.mig or not parts.chip:
        return None
    known = facts.CHIPS.get(parts.chip)
    if known is None:
        model = normalize_gpu_model(parts.chip)
    elif isinstance(known, str):
        model = known
    elif parts.memory_gb is not None:
        model = known.get(parts.memory_gb)
    else:
        model = _by_memory(known, wire_decimal(vram_gb))
    return None if model is None else GpuKind(model, parts.form)


def _by_memory(models: dict[int, str], vram_gb: Decimal | None) -> str | None:
    """The model whose memory the card's reported memory is, within `MEMORY_TOLERANCE`."""
    if vram_gb is None:
        return None
    size = min(models, key=lambda gb: abs(gb - vram_gb))
    return models[size] if abs(size - vram_gb) <= size * MEMORY_TOLERANCE else None


def to_offer(row: Any) -> Offer | None:
    """One `GET /offers` row as an Offer, or None if it cannot be deployed as whole GPUs."""
    if not isinstance(row, dict):
        return None
    gpu = _obj(row.get("gpu"))
    slug, count = gpu.get("slug"), row.get("gpuCount")
    if not isinstance(slug, str) or not slug:
        logger.debug("QuantaCloud offer without a GPU slug left out")
        return None
    kind = gpu_kind(slug, gpu.get("vramGB"))
    if kind is None:
        logger.debug("QuantaCloud GPU %r is not in the catalogue (or a MIG slice): left out", slug)
        return None
    price = wire_decimal(row.get("priceHourly"))
    region, offer_id = row.get("region"), row.get("id")
    if (
        not isinstance(count, int)
        or isinstance(count, bool)
        or count < 1
        or price is None
        or price <= 0
        or not isinstance(region, str)
        or not isinstance(offer_id, str)
        or row.get("isAvailable") is False
    ):
        logger.debug("QuantaCloud offer for %r without a usable count/price/region/id", slug)
        return None
    specs = _obj(row.get("specs"))
    disk = _int(specs.get("disk"))
    return Offer(
        provider=PROVIDER,
        region=region,
        sku=f"{slug}-x{count}",
        gpu_model=kind.model,
        gpu_count=count,
        price_per_hour=price,
        interconnect=interconnect_for(kind, row),
        vcpus=_int(specs.get("vcpu")),
        ram_gb=_int(specs.get("ram")),
        disk_gb=disk if disk is not None else _int(row.get("storageMinGB")),
        disk_fixed=True,
        available=None,
        offer_id=offer_id,
    )


def interconnect_for(kind: GpuKind, row: dict[str, Any]) -> Interconnect | None:
    """SXM from the slug, else the `interconnect` field, else `nvlinkEnabled`, else what the
    slug's form says (`pcie`), else None."""
    said = facts.FORMS.get(kind.form) if kind.form else None
    if said is Interconnect.SXM:
        return said
    named = row.get("interconnect")
    if isinstance(named, str):
        for choice in (Interconnect.SXM, Interconnect.NVLINK, Interconnect.PCIE):
            if choice.value in named.lower():
                return choice
    nvlink = row.get("nvlinkEnabled")
    if isinstance(nvlink, bool):
        return Interconnect.NVLINK if nvlink else Interconnect.PCIE
    return said


def to_vm(row: dict[str, Any]) -> VM | None:
    """A deployment object as a VM; unknown statuses become UNKNOWN, never an error. Its
    region, sku and time are what the deployment says, where it says them (they are [P])."""
    vm_id = row.get("id")
    if not isinstance(vm_id, str | int) or isinstance(vm_id, bool):
        return None
    status = _status(row)
    connection = _obj(row.get("connection"))
    ip = connection.get("public_ip")
    slug, count, region = _slug(row), _count(row), row.get(facts.REGION)
    return VM(
        provider=PROVIDER,
        id=str(vm_id),
        state=VM_STATES.get(status, VMState.UNKNOWN),
        provider_status=status,
        region=region if isinstance(region, str) else None,
        sku=f"{slug}-x{count}" if slug is not None and count is not None else None,
        ip=ip if isinstance(ip, str) and ip else None,
        created_at=_created_at(row),
    )


def timestamp(value: Any) -> datetime | None:
    """An ISO 8601 string or Unix seconds/milliseconds as an aware datetime, or None; an ISO
    time without a zone is None, as its zone is not known."""
    try:
        if isinstance(value, str) and value:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            moment = datetime.fromtimestamp(value / 1000 if value > 1e11 else value, UTC)
        else:
            return None
    except (ValueError, OverflowError, OSError):
        return None
    return moment if moment.tzinfo else None


def _created_at(row: dict[str, Any]) -> datetime | None:
    return next((t for key in facts.CREATED_AT if (t := timestamp(row.get(key)))), None)


def _slug(row: dict[str, Any]) -> str | None:
    slug = _obj(row.get(facts.GPU)).get("slug")
    return slug.strip() if isinstance(slug, str) and slug.strip() else None


def _count(row: dict[str, Any]) -> int | None:
    counts = (_int(row.get(key)) for key in facts.GPU_COUNT)
    return next((count for count in counts if count is not None and count > 0), None)


def _same_fingerprint(listed: Any, ours: str) -> bool:
    """Fingerprints compared without base64 padding (`ssh-keygen` drops it, others keep it)."""
    return isinstance(listed, str) and listed.strip().rstrip("=") == ours.rstrip("=")


def _status(body: dict[str, Any]) -> str:
    status = body.get("status")
    return status.strip().lower() if isinstance(status, str) else ""


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    amount = wire_decimal(value)
    return int(amount) if amount is not None and amount == amount.to_integral_value() else None


def cheapest_offers(rows: list[Any]) -> list[Offer]:
    """`GET /offers` rows -> in-stock offers, the cheapest per (region, sku)."""
    offers: dict[tuple[str, str, str], Offer] = {}
    for row in rows:
        offer = to_offer(row)
        if offer is not None and (
            offer.key not in offers or offer.price_per_hour < offers[offer.key].price_per_hour
        ):
            offers[offer.key] = offer
    return list(offers.values())


def created_deployment(body: Any, offer: Offer) -> VM | None:
    """`POST /deployments` -> the new deployment as a VM of `offer`; None if it has no id."""
    if not isinstance(body, dict):
        return None
    vm_id = body.get("id")
    if not isinstance(vm_id, str | int) or isinstance(vm_id, bool) or not str(vm_id):
        return None
    status = _status(body)
    return VM(
        provider=PROVIDER,
        id=str(vm_id),
        state=VM_STATES.get(status, VMState.UNKNOWN),
        provider_status=status,
        region=offer.region,
        sku=offer.sku,
        created_at=_created_at(body),
    )


def deployment(body: Any) -> VM | None:
    """`GET /deployments/{id}` -> the VM (None if the object has no id)."""
    if not isinstance(body, dict):
        raise Unavailable(PROVIDER, "GET /deployments/{id}: not an object")
    return to_vm(body)


def live_deployments(rows: list[Any]) -> list[VM]:
    """`GET /deployments` rows -> the deployments that are not gone, failed or stopping."""
    vms = (to_vm(row) if isinstance(row, dict) else None for row in rows)
    return [vm for vm in vms if vm is not None and vm.state not in NOT_LIVE]


def candidates(rows: list[Any], offer: Offer, since: datetime) -> list[VM]:
    """Live deployments that may be what a create of `offer` made at or after `since`.

    The documented deployment is `{id, status, failure_code, connection}`: its time, GPU, count
    and region (`facts.CREATED_AT`, ...) are our simulator's proposal, named as we guessed. So a
    deployment is ruled out only where one of them, normalized, says it is something else: a
    time with a zone before `since`; a slug of another GPU model or form, read through the slug
    map (`h100-sxm` and `h100-sxm-80gb` agree); another GPU count; another region token. A field
    absent, or one we cannot read, rules nothing out, and the VM carries the offer's sku and
    region where the deployment agrees with them and None where it cannot tell, so the watcher's
    adoption, which compares those with the attempt's, rules out no more than this does.

    With nothing to go by, every live deployment is a candidate. Adoption then relies on what it
    does anyway: it drops the VMs attempts own, adopts only when no other open attempt could
    have made a candidate (one of no known kind could be any attempt's), and otherwise waits for
    their answers. And on the account being the service's own: a live deployment no attempt
    owns is one of its creates, perhaps a given-up one's, which the reconciler reports.
    """
    found = []
    wanted = slug_parts(offer.sku.rpartition("-x")[0] or offer.sku)
    for row in rows:
        vm = to_vm(row) if isinstance(row, dict) else None
        if vm is None or vm.state in NOT_LIVE:
            continue
        kind, region = _same_kind(row, offer, wanted), _same_region(row, offer)
        if (vm.created_at is not None and vm.created_at < since) or False in (kind, region):
            continue
        found.append(
            replace(
                vm,
                sku=offer.sku if kind else None,
                region=offer.region if region else None,
            )
        )
    return found


def _same_kind(row: dict[str, Any], offer: Offer, wanted: Slug) -> bool | None:
    """Whether the deployment's GPU model, form and count are the offer's; None where it does
    not say, or says it in a way we cannot read."""
    count, slug = _count(row), _slug(row)
    if slug is not None and slug_parts(slug).mig:
        return False  # a slice: never what we create
    kind = None if slug is None else gpu_kind(slug)
    verdicts = [None if count is None else count == offer.gpu_count]
    if kind is not None:
        verdicts.append(kind.model == offer.gpu_model)
        if kind.form is not None and wanted.form is not None:
            verdicts.append(kind.form == wanted.form)
        elif kind.form is not None or wanted.form is not None:
            verdicts.append(None)
    else:
        verdicts.append(None)
    if False in verdicts:
        return False
    return None if None in verdicts else True


def _same_region(row: dict[str, Any], offer: Offer) -> bool | None:
    """Whether the deployment's region is the offer's; None unless it is a region token."""
    region = row.get(facts.REGION)
    token = region.strip().lower() if isinstance(region, str) else ""
    if not REGION_TOKEN.fullmatch(token):
        return None
    return token == offer.region.strip().lower()


def ssh_key_id(body: Any, key_fingerprint: str) -> str | None:
    """`GET /users/me/ssh-keys` -> the id of the key with this fingerprint, if listed."""
    for key in body if isinstance(body, list) else []:
        if (
            isinstance(key, dict)
            and _same_fingerprint(key.get(facts.KEY_FINGERPRINT), key_fingerprint)
            and isinstance(key.get(facts.KEY_ID), str | int)
        ):
            return str(key[facts.KEY_ID])
    return None


def created_id(body: Any) -> str | None:
    """The `id` of a created object (an SSH key), if the answer has one."""
    key_id = body.get(facts.KEY_ID) if isinstance(body, dict) else None
    if not isinstance(key_id, str | int) or isinstance(key_id, bool):
        return None
    return str(key_id)


def balance(body: Any) -> Decimal:
    """`GET /account/balance` -> USD (unverified shape: `balance` or `amount`, number or string)."""
    value = body
    if isinstance(body, dict):
        value = next((body[k] for k in facts.BALANCE_KEYS if k in body), None)
        if isinstance(value, dict):
            value = value.get("amount", value.get("value"))
    amount = wire_decimal(value)
    if amount is None:
        raise Unavailable(PROVIDER, "GET /account/balance: no balance in the answer")
    return amount
