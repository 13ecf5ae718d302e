"""What a provider package tells the rest of the service about itself: one `ProviderSpec`.

The list of specs is `app.providers.registry.SPECS`; everything that must know the providers
(settings, the watcher, demo mode, the CLI, the simulators, the test fixtures) loops over it.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from app.core.catalogue import ClusterInterconnect, Provider
from app.core.metering import BillingUnit
from app.providers.base import ProviderAdapter
from app.providers.budget import MIN_READ_SECONDS, Budget, RateLimit, Request, StockRead
from app.providers.diagnosis import Diagnose
from app.providers.http import Connections
from app.settings import ProviderSettings, Settings

PER_MINUTE = BillingUnit(blocks_per_hour=60)


S = TypeVar("S", bound=ProviderSettings)


@dataclass(frozen=True)
class Timeouts:
    """Seconds a provider call may take: every call but creates, and creates."""

    read: float
    create: float


@dataclass(frozen=True)
class SimulatorMount:
    """Where a provider's simulator is served and what it accepts.

    The simulators share one server; this one answers under `path` (`/verda`), its API below
    that at `api_base` (`/v1`), its control API at `path + "/_sim"`.
    """

    path: str
    api_base: str
    # Settings fields -> the values the simulator accepts for them.
    credentials: Mapping[str, str]

    def base_url(self, root_url: str) -> str:
        """The provider API's base URL when the simulators are served at `root_url`."""
        return f"{root_url.rstrip('/')}{self.path}{self.api_base}"

    def control_url(self, root_url: str) -> str:
        """The simulator's control API (`/_sim`) when the simulators are served at `root_url`."""
        return f"{root_url.rstrip('/')}{self.path}/_sim"


@dataclass(frozen=True)
class ClusterShapes:
    """The clusters a provider can make: 2 to `max_nodes` nodes, of these GPU models and GPUs
    per node (None: any it sells), with this fabric between the nodes (None: none). `assembled`:
    made of its single VMs created together (`providers/assembly.py`), not sold as one object,
    so a cluster whose nodes do not all run in time is taken apart."""

    max_nodes: int
    gpu_models: frozenset[str] | None = None
    gpus_per_node: frozenset[int] | None = None
    interconnect: ClusterInterconnect | None = None
    assembled: bool = False

    def refusal(self, gpu_model: str, gpu_count: int, nodes: int, fabric: str | None) -> str | None:
        """Why a cluster of `nodes` x `gpu_count` `gpu_model` cannot be made here, or None."""
        if nodes > self.max_nodes:
            return f"makes clusters of at most {self.max_nodes} nodes"
        if self.gpu_models is not None and gpu_model not in self.gpu_models:
            return f"makes clusters of {', '.join(sorted(self.gpu_models))} only"
        if self.gpus_per_node is not None and gpu_count not in self.gpus_per_node:
            counts = ", ".join(str(c) for c in sorted(self.gpus_per_node))
            return f"makes clusters of nodes with {counts} GPUs only"
        if fabric is not None and fabric != self.interconnect:
            return f"has no {fabric} between a cluster's nodes"
        return None


@dataclass(frozen=True)
class ProviderSpec(Generic[S]):
    """Everything the service needs to know about one provider, and how to build its adapter."""

    provider: Provider
    display_name: str
    settings_model: type[S]
    build_adapter: Callable[[S, Connections, Timeouts], ProviderAdapter]
    # Whether a VM can be found again by the name and tag its create was sent with.
    finds_vms_by_name: bool
    rate_limits: tuple[RateLimit, ...]
    stock_read: StockRead  # the requests one full stock read sends
    create: Request | None  # the create request (its buckets keep a margin for creates)
    # How it rounds the time a machine billed (refunds follow it), and the user its images log
    # in as (the `ssh` command an order shows).
    billing: BillingUnit = PER_MINUTE
    ssh_user: str = "root"
    simulator: SimulatorMount | None = None
    # Its own read-only checks for `autoprovision doctor` (image, environments...), if any.
    diagnose: Diagnose | None = None
    # A provider for tests only: orders may name it only while a test offers it (see registry).
    for_tests: bool = False
    clusters: ClusterShapes | None = None  # None: single machines only
    # Whether a create can carry a start-up script the machine runs once at boot (Verda's
    # startup scripts, Hyperstack's user data). False: an order with a script never deploys
    # here; a provider says it can, so one that forgets is never sent a script it drops.
    runs_startup_scripts: bool = False
    # Whether an order may name the image its machine boots (`ProviderAdapter.images` lists
    # them). False: one stock image, and an order naming an image never deploys here.
    chooses_image: bool = False

    def cluster_refusal(
        self, gpu_model: str, gpu_count: int, nodes: int, fabric: str | None
    ) -> str | None:
        """Why this provider cannot deploy `nodes` machines of this shape together; None if
        it can (any single machine can be ordered)."""
        if nodes == 1:
            return None
        if self.clusters is None:
            return "makes no clusters (single machines only)"
        return self.clusters.refusal(gpu_model, gpu_count, nodes, fabric)

    def planned_period(self) -> float:
        """Seconds between full stock reads when the budget plans them and nothing else is
        sent (the period history coverage and offer freshness are judged by)."""
        budget = Budget(self.rate_limits, create=self.create)
        return max(MIN_READ_SECONDS, budget.nominal_period(self.stock_read))

    def planned(self, settings: Settings) -> bool:
        """Whether the poll budget plans this provider's stock reads."""
        own = self.settings_of(settings)
        explicit = "poll_seconds" in own.model_fields_set
        return own.poll_seconds is None or (settings.poll_plan and not explicit)

    def poll_period(self, settings: Settings) -> float:
        """The period set for this provider, or the planned one."""
        own = self.settings_of(settings).poll_seconds
        return self.planned_period() if own is None or self.planned(settings) else own

    @property
    def name(self) -> str:
        """The provider's name in the API, the database and environment variables."""
        return str(self.provider)

    def settings_of(self, settings: Settings) -> S:
        """This provider's settings within the service's `Settings`."""
        found = settings.providers.get(self.name)
        if found is None:  # a provider registered after the settings were read (tests)
            return self.settings_model()
        if not isinstance(found, self.settings_model):
            raise LookupError(f"providers.{self.name} is not a {self.settings_model.__name__}")
        return found

    def at_simulator(self, settings: S, root_url: str, **overrides: Any) -> S:
        """`settings` pointed at this provider's simulator at `root_url`, with its credentials."""
        if self.simulator is None:
            raise LookupError(f"{self.display_name} has no simulator")
        values = {
            **settings.model_dump(),
            "base_url": self.simulator.base_url(root_url),
            **self.simulator.credentials,
            **overrides,
        }
        return self.settings_model.model_validate(values)  # validates; reads no environment

    def simulator_environment(self, root_url: str, **overrides: Any) -> dict[str, str]:
        """The environment variables that point a service process at this provider's simulator."""
        if self.simulator is None:
            raise LookupError(f"{self.display_name} has no simulator")
        values = {
            "base_url": self.simulator.base_url(root_url),
            **self.simulator.credentials,
            **overrides,
        }
        return {self.settings_model.env_name(k): str(v) for k, v in values.items()}
