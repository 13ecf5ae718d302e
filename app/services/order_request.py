"""What a new order asks for, as the services take it in: already validated by whoever took it
in (the API), not yet checked against the providers, the account or the image lists (that is
`placing.preview`)."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from app.open_models.catalogue import OpenModel

Shape = tuple[str, int, int]  # GPU model, GPUs per node, nodes


@dataclass(frozen=True)
class ModelOrder:
    """An order by model as the API took it in: what to expand into alternatives."""

    model: OpenModel
    providers: Sequence[str]
    max_price_per_hour: Decimal | None
    min_cache_gb: int
    regions: list[str] | None = None
    min_disk_gb: int | None = None
    prices: Mapping[Shape, Decimal] | None = None  # per shape, over max_price_per_hour


@dataclass(frozen=True)
class NewAlternative:
    """One shape an order may take, already validated by whoever took it in (the API)."""

    gpu_model: str
    gpu_count: int
    providers: Sequence[str]
    max_price_per_hour: Decimal
    regions: list[str] | None = None
    min_disk_gb: int | None = None
    interconnect: str | None = None
    nodes: int = 1
    cluster_interconnect: str | None = None

    def stored(self) -> dict[str, Any]:
        """As `orders.alternatives` keeps it (JSON: the price as a string)."""
        return {
            "gpu_model": self.gpu_model,
            "gpu_count": self.gpu_count,
            "nodes": self.nodes,
            "providers": [str(p) for p in self.providers],
            "max_price_per_hour": str(self.max_price_per_hour),
            "regions": self.regions,
            "min_disk_gb": self.min_disk_gb,
            "interconnect": None if self.interconnect is None else str(self.interconnect),
            "cluster_interconnect": (
                None if self.cluster_interconnect is None else str(self.cluster_interconnect)
            ),
        }


@dataclass(frozen=True)
class NewOrder:
    """What a new order asks for, already validated by whoever took it in (the API): one or
    more alternatives (the first is its own machine; most orders have just that one)."""

    alternatives: Sequence[NewAlternative]
    prefer: str = "cheapest"
    model: str | None = None  # ordered by model: its id (the alternatives hold it)
    # An order by model before placing expands it: `alternatives` is empty until then.
    by_model: ModelOrder | None = None
    serve_engine: str | None = None  # the engine its generated start-up script serves it with
    on_node_lost: str = "keep"
    expires_at: datetime | None = None
    name: str | None = None
    ssh_public_key: str | None = None
    max_runtime_hours: Decimal | None = None
    max_total_usd: Decimal | None = None
    startup_script: str | None = None  # run once when its machine boots; sealed at rest
    image: str | None = None  # the OS image its machine boots, as its providers name it

    @property
    def has_script(self) -> bool:
        """Whether it runs a start-up script: its own, or the one `serve` writes."""
        return self.startup_script is not None or self.serve_engine is not None

    @property
    def first(self) -> NewAlternative:
        """Its first alternative: the order's own machine columns."""
        return self.alternatives[0]

    @property
    def providers(self) -> list[str]:
        """Every provider any of its alternatives accepts, in the order first named."""
        return list(dict.fromkeys(str(p) for a in self.alternatives for p in a.providers))
