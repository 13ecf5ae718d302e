"""What `orders place` and `orders limits` take, checked before any request: amounts and hours
as decimals (never float), lists, the idempotency key, the SSH key, and the options that say
what a cluster is. Anything the API checks too is sent as typed, so its message explains."""

import uuid
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any

import typer

MAX_IDEMPOTENCY_KEY = 255


def usd(value: str, option: str) -> str:
    """A price as the user wrote it, checked to be a decimal number (no float on the way)."""
    try:
        amount: Decimal | None = Decimal(value.strip())
    except InvalidOperation:
        amount = None
    if amount is None or not amount.is_finite():
        raise typer.BadParameter(f"{value!r} is not an amount like 46.50", param_hint=option)
    return str(amount)


def limit(value: str | None, option: str, *, money: bool) -> str | None:
    """A limit as the user wrote it: a number (hours or USD), or `none` to remove it."""
    if value is None or value.strip().lower() == "none":
        return None
    if money:
        return usd(value, option)
    try:
        hours: Decimal | None = Decimal(value.strip())
    except InvalidOperation:
        hours = None
    if hours is None or not hours.is_finite():
        raise typer.BadParameter(
            f"{value!r} is not a number of hours like 12 or 0.5", param_hint=option
        )
    return str(hours)


MaxRuntime = Annotated[
    str | None,
    typer.Option(
        "--max-runtime-hours",
        help="Terminate the machine after this many billed hours (e.g. 12), counted from "
        "when its provider starts billing.",
        show_default=False,
    ),
]
MaxTotal = Annotated[
    str | None,
    typer.Option(
        "--max-total",
        help="max_total_usd: terminate before an hour would take what was paid past this "
        "(USD, fees included).",
        show_default=False,
    ),
]


def listed(values: list[str] | None) -> list[str]:
    """Repeated options, each possibly comma-separated, as one list."""
    return [item.strip() for value in values or [] for item in value.split(",") if item.strip()]


def idempotency_key(value: str | None) -> str:
    if value is None:
        return str(uuid.uuid4())
    if not (0 < len(value) <= MAX_IDEMPOTENCY_KEY and value.isascii() and value.isprintable()):
        raise typer.BadParameter(
            f"must be 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters",
            param_hint="--idempotency-key",
        )
    return value


def ssh_key(line: str | None, path: Path | None) -> str | None:
    if line is not None and path is not None:
        raise typer.BadParameter(
            "give the key or a file holding it, not both",
            param_hint="--ssh-public-key / --ssh-public-key-file",
        )
    if path is None:
        return line
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        message = f"cannot read {path}: {exc}"
        raise typer.BadParameter(message, param_hint="--ssh-public-key-file") from None


Image = Annotated[
    str | None,
    typer.Option(
        "--image",
        help="The OS image the machine boots, as its providers name it (checked against their "
        "image lists when placed); only providers that let an order choose one deploy it.",
    ),
]

StartupScript = Annotated[
    Path | None,
    typer.Option(
        "--startup-script",
        help="A file (UTF-8 text, at most 32 KiB) the machine runs once when it boots, at "
        "providers that run one; kept encrypted, shown again only as its size and SHA-256.",
    ),
]


def script_text(path: Path | None) -> str | None:
    """The start-up script in `path`, as it is (UTF-8); a clear error if it cannot be read."""
    if path is None:
        return None
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as exc:
        message = f"cannot read {path}: {exc}"
        raise typer.BadParameter(message, param_hint="--startup-script") from None
    except UnicodeDecodeError as exc:
        message = f"{path} is not UTF-8 text (byte {exc.start}: {exc.object[exc.start]:#04x})"
        raise typer.BadParameter(message, param_hint="--startup-script") from None


Nodes = Annotated[
    int,
    typer.Option(
        "--nodes",
        help="Machines of --gpu-count GPUs deployed together as one cluster, at one provider "
        "in one region (1-16); --max-price is then for the whole cluster.",
    ),
]
ClusterInterconnect = Annotated[
    str | None,
    typer.Option(
        "--cluster-interconnect",
        help="infiniband: the fabric the cluster's nodes must share (with --nodes 2 or more). "
        "Default: any.",
        show_default=False,
    ),
]
OnNodeLost = Annotated[
    str | None,
    typer.Option(
        "--on-node-lost",
        help="When the provider loses a node of the cluster: keep the rest (the default; you "
        "decide) or terminate it (the unused time refunded).",
        show_default=False,
    ),
]


def cluster(nodes: int, interconnect: str | None, on_node_lost: str | None) -> dict[str, Any]:
    """The body's cluster fields the user gave: none for a single machine left as it is."""
    fields = {
        "nodes": None if nodes == 1 else nodes,
        "cluster_interconnect": interconnect,
        "on_node_lost": on_node_lost,
    }
    return {name: value for name, value in fields.items() if value is not None}


Alternatives = Annotated[
    list[str] | None,
    typer.Option(
        "--alt",
        help="Another shape the order may take instead (repeat, up to 7): comma-separated "
        "key=value pairs, e.g. gpu=h200,count=8,nodes=2,max-price=60 (also providers=a+b, "
        "regions=A+B, min-disk-gb, interconnect, cluster-interconnect; "
        "providers default to --provider's). The order deploys one of them.",
        show_default=False,
    ),
]
Prefer = Annotated[
    str | None,
    typer.Option(
        "--prefer",
        help="With --alt: cheapest (the default: the cheapest offer any shape matches) or "
        "listed (the first shape, in the order given, that shows).",
        show_default=False,
    ),
]
# The body's fields that make one shape (the top level's, or one alternative's).
MACHINE_FIELDS = (
    "gpu_model",
    "gpu_count",
    "providers",
    "max_price_per_hour",
    "regions",
    "min_disk_gb",
    "interconnect",
    "nodes",
    "cluster_interconnect",
)
# --alt keys -> the body's field names; lists take `+` between their items.
_ALT_KEYS = {
    "gpu": "gpu_model",
    "count": "gpu_count",
    "nodes": "nodes",
    "providers": "providers",
    "max-price": "max_price_per_hour",
    "regions": "regions",
    "min-disk-gb": "min_disk_gb",
    "interconnect": "interconnect",
    "cluster-interconnect": "cluster_interconnect",
}
_ALT_REQUIRED = ("gpu", "count", "max-price")


def alternative(spec: str, providers: list[str]) -> dict[str, Any]:
    """One `--alt` as the body's alternative; numbers are sent as typed, so the API's message
    explains a wrong one (a malformed spec is refused here, naming the key)."""
    given: dict[str, str] = {}
    for pair in (part.strip() for part in spec.split(",") if part.strip()):
        key, equals, value = pair.partition("=")
        key = key.strip().lower()
        if not equals or key not in _ALT_KEYS:
            known = ", ".join(_ALT_KEYS)
            raise typer.BadParameter(
                f"{pair!r} is not key=value with a key of {known}", param_hint="--alt"
            )
        given[key] = value.strip()
    missing = [key for key in _ALT_REQUIRED if key not in given]
    if missing:
        raise typer.BadParameter(f"{spec!r} needs {', '.join(missing)}", param_hint="--alt")
    body: dict[str, Any] = {"providers": providers}
    for key, value in given.items():
        field = _ALT_KEYS[key]
        if field in ("providers", "regions"):
            body[field] = [item for item in value.split("+") if item]
        elif field == "max_price_per_hour":
            body[field] = usd(value, "--alt max-price")
        elif field in ("gpu_count", "nodes", "min_disk_gb"):
            body[field] = int(value) if value.isdigit() else value
        else:
            body[field] = value
    return body


def machine_or_model(
    gpu_model: str | None, gpu_count: int | None, model: str | None, min_cache_gb: int | None
) -> dict[str, Any]:
    """The body's machine (-g and -n) or model (--model, --min-cache-gb): one of the two."""
    if model is not None:
        if gpu_model is not None or gpu_count is not None:
            raise typer.BadParameter("give -g/-n or --model, not both", param_hint="--model")
        body: dict[str, Any] = {"model": model}
        if min_cache_gb is not None:
            body["min_cache_gb"] = min_cache_gb
        return body
    if min_cache_gb is not None:
        raise typer.BadParameter("is for orders by --model", param_hint="--min-cache-gb")
    if gpu_model is None or gpu_count is None:
        missing = "--gpu-model" if gpu_model is None else "--gpu-count"
        raise typer.BadParameter(f"missing {missing} (or order by --model)", param_hint=missing)
    return {"gpu_model": gpu_model, "gpu_count": gpu_count}
