"""Which machine shapes hold an open model: the fit rule over every GPU the catalogue names,
and the smallest cluster a provider can make where no single machine holds it."""

from dataclasses import dataclass
from decimal import Decimal

from app.core.catalogue import GPU_MODELS
from app.core.open_models import Fit, OpenModel, fit
from app.providers.registry import offered_providers, spec_for

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


def _cluster_providers(gpu_model: str, nodes: int) -> tuple[str, ...]:
    return tuple(
        str(p)
        for p in offered_providers()
        if spec_for(p).cluster_refusal(gpu_model, CLUSTER_GPUS, nodes, None) is None
    )


def _smallest_cluster(model: OpenModel, gpu_model: str, min_cache_gb: Decimal) -> ShapeFit | None:
    for nodes in range(2, MAX_MODEL_NODES + 1):
        made = fit(model, gpu_model, CLUSTER_GPUS, nodes)
        if made.holds(min_cache_gb):
            providers = _cluster_providers(gpu_model, nodes)
            return ShapeFit(made, True, providers) if providers else None
    return None


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
