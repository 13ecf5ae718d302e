"""Which machine shapes hold an open model: the fit rule over every GPU the catalogue names,
and the smallest cluster a provider can make where no single machine holds it."""

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from app.core.catalogue import GPU_MODELS
from app.core.errors import field_error
from app.core.market import MAX_ALTERNATIVES
from app.open_models.catalogue import SERVING_GPUS, Fit, OpenModel, fit
from app.providers.registry import display_name, offered_providers, spec_for
from app.services.order_request import ModelOrder, NewAlternative

GPU_COUNTS = (1, 2, 4, 8)  # GPUs per machine the providers sell
CLUSTER_GPUS = 8  # a cluster's nodes are 8-GPU machines (the only nodes any provider clusters)
# The largest cluster suggested for a model: the engines' recipes for the catalogue's models go
# up to 4 nodes of 8 (vLLM's Kimi K3 on H100). More nodes of a smaller GPU may pass the memory
# rule, but no recipe runs a model that way.
MAX_MODEL_NODES = 4


@dataclass(frozen=True)
class ShapeFit:
    """A fit, whether it holds the model with the cache asked for, and for a cluster the
    providers that can make it."""

    fit: Fit
    holds: bool
    cluster_providers: tuple[str, ...] | None = None


def _cluster_providers(
    gpu_model: str, nodes: int, among: Sequence[str] | None = None
) -> tuple[str, ...]:
    """Those of `among` (default: every provider orders may name) that make such a cluster."""
    return tuple(
        str(p)
        for p in (offered_providers() if among is None else among)
        if spec_for(p).cluster_refusal(gpu_model, CLUSTER_GPUS, nodes, None) is None
    )


def _smallest_cluster_fit(model: OpenModel, gpu_model: str, min_cache_gb: Decimal) -> Fit | None:
    """The fewest nodes of 8 `gpu_model` (2 to MAX_MODEL_NODES) that hold `model`, if any."""
    for nodes in range(2, MAX_MODEL_NODES + 1):
        made = fit(model, gpu_model, CLUSTER_GPUS, nodes)
        if made.holds(min_cache_gb):
            return made
    return None


def _smallest_cluster(model: OpenModel, gpu_model: str, min_cache_gb: Decimal) -> ShapeFit | None:
    made = _smallest_cluster_fit(model, gpu_model, min_cache_gb)
    providers = () if made is None else _cluster_providers(gpu_model, made.nodes)
    return ShapeFit(made, True, providers) if made is not None and providers else None


def shapes(model: OpenModel, *, min_cache_gb: Decimal = Decimal(0)) -> list[ShapeFit]:
    """Every single machine of 1, 2, 4 or 8 of each GPU model, and for each GPU model whose
    8-GPU machine does not hold `model`, the smallest cluster of them (up to MAX_MODEL_NODES)
    that does, where some provider can make it; those that hold it first, the tightest first."""
    found: list[ShapeFit] = []
    for gpu_model in GPU_MODELS:
        for count in GPU_COUNTS:
            made = fit(model, gpu_model, count)
            found.append(ShapeFit(made, made.holds(min_cache_gb)))
        if not found[-1].holds:
            cluster = _smallest_cluster(model, gpu_model, min_cache_gb)
            if cluster is not None:
                found.append(cluster)
    return sorted(found, key=lambda s: (not s.holds, s.fit.gpu_memory_gb, s.fit.nodes))


def _serving_shape(model: OpenModel, gpu_model: str, min_cache: Decimal) -> Fit | None:
    """The smallest machine (GPUs, then nodes of 8) of `gpu_model` that holds `model`."""
    for count in GPU_COUNTS:
        single = fit(model, gpu_model, count)
        if single.holds(min_cache):
            return single
    return _smallest_cluster_fit(model, gpu_model, min_cache)


def alternatives_for(order: ModelOrder) -> list[NewAlternative]:
    """The shapes that hold the model with the cache room asked for, at the order's
    providers that can make them: for each GPU the model guides size machines of, its
    smallest such machine; NVLink (or SXM) between the GPUs of a node; a disk that holds the
    checkpoint. 422 naming the field when nothing holds it or a price names no such shape."""
    prices = dict(order.prices or {})
    if order.max_price_per_hour is None and not prices:
        raise field_error("max_price_per_hour", "Field required (or give prices per shape)")
    disk = max(order.model.disk_gb, order.min_disk_gb or 0)
    found: list[NewAlternative] = []
    for gpu_model in SERVING_GPUS:
        shape = _serving_shape(order.model, gpu_model, Decimal(order.min_cache_gb))
        if shape is None:
            continue
        key = (shape.gpu_model, shape.gpu_count, shape.nodes)
        able = (
            [str(p) for p in order.providers]
            if shape.nodes == 1
            else list(_cluster_providers(gpu_model, shape.nodes, among=order.providers))
        )
        price = prices.pop(key, order.max_price_per_hour)
        if not able or price is None:
            continue
        found.append(
            NewAlternative(
                gpu_model=gpu_model,
                gpu_count=shape.gpu_count,
                providers=able,
                max_price_per_hour=price,
                regions=order.regions,
                min_disk_gb=disk,
                interconnect="nvlink" if shape.gpu_count > 1 else None,
                nodes=shape.nodes,
            )
        )
    if prices:
        gpu_model, count, nodes = next(iter(prices))
        raise field_error(
            "prices",
            f"{nodes} x {count}x {gpu_model} is not a shape this order takes for "
            f"{order.model.name} (the shapes: GET /v1/models/{order.model.id}/fit)",
        )
    if not found:
        names = ", ".join(display_name(p) for p in order.providers)
        raise field_error(
            "model",
            f"no machine {names} can make holds {order.model.name} with "
            f"{order.min_cache_gb} GB for the cache",
        )
    return found[:MAX_ALTERNATIVES]
