"""Verda as the service sees it: its settings, published limits and simulator, in one `SPEC`."""

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from app.core.catalogue import ClusterInterconnect
from app.core.metering import BillingUnit
from app.providers.base import ProviderAdapter
from app.providers.http import Connections
from app.providers.spec import ClusterShapes, ProviderSpec, SimulatorMount, Timeouts
from app.providers.verda import limits
from app.providers.verda.adapter import VerdaAdapter
from app.providers.verda.doctor import diagnose
from app.providers.verda.parse import PROVIDER
from app.settings import ProviderSettings


class VerdaSettings(ProviderSettings):
    """`AUTOPROVISION_VERDA_*`: where Verda's API is, our OAuth2 client, the images, the period."""

    model_config = SettingsConfigDict(env_prefix="AUTOPROVISION_VERDA_")
    credential_fields = ("client_id", "client_secret")

    base_url: str = Field(default="https://api.verda.com/v1", description="Verda API.")
    client_id: SecretStr | None = Field(
        default=None, description="Verda OAuth2 client id (Verda console, API keys)."
    )
    client_secret: SecretStr | None = Field(
        default=None, description="Verda OAuth2 client secret (Verda console, API keys)."
    )
    image: str = Field(
        default="ubuntu-24.04-cuda-12.8-open-docker", description="OS image Verda VMs boot."
    )
    cluster_image: str = Field(
        default="ubuntu-24.04-cuda-13.0-cluster",
        description="OS image Verda Instant Clusters boot (one of `GET /v1/images/cluster`).",
    )
    # One full-list read a period: 48 a minute against its path's 60.
    # Used when set, or with AUTOPROVISION_POLL_PLAN=false; otherwise the poll budget plans.
    poll_seconds: float | None = Field(
        default=1.25,
        ge=0.1,
        le=600,
        description="Set: Verda's stock is read at this fixed period (seconds) instead of as the "
        "poll budget plans (its limit: 60 requests a minute on each path of "
        "`/instance-availability`). The default applies only with `AUTOPROVISION_POLL_PLAN=false`.",
    )
    # Verda's SDK waits 3 minutes for a new instance to leave `ordered`; dstack saw failed
    # instances stay `provisioning` for 10 minutes: twice that.
    boot_deadline_minutes: float = Field(
        default=20.0,
        gt=0,
        le=1440,
        description="A single machine not running with an IP this many minutes after Verda "
        "accepted its create (or found the VM of an unclear one) is deleted, what was paid "
        "for it refunded, and its order waits again. One still `provisioning` refuses "
        "deletes: it is deleted once it can be, unless it runs first.",
    )


# What its simulator (`app/simulators/verda/`) accepts; the simulator reads them here.
SIMULATOR_CREDENTIALS = {"client_id": "sim-client", "client_secret": "sim-secret"}


def build_adapter(
    settings: VerdaSettings, client: Connections, timeouts: Timeouts
) -> ProviderAdapter:
    """A Verda adapter over `client` (the settings must hold credentials)."""
    if settings.client_id is None or settings.client_secret is None:
        raise ValueError("Verda needs a client id and a client secret")
    return VerdaAdapter(
        client,
        base_url=settings.base_url,
        client_id=settings.client_id,
        client_secret=settings.client_secret,
        image=settings.image,
        cluster_image=settings.cluster_image,
        timeout=timeouts.read,
        create_timeout=timeouts.create,
    )


SPEC = ProviderSpec(
    provider=PROVIDER,
    display_name="Verda",
    settings_model=VerdaSettings,
    build_adapter=build_adapter,
    finds_vms_by_name=True,
    rate_limits=limits.RATE_LIMITS,
    stock_read=limits.FULL_READ,
    create=limits.CREATE,
    # 10-minute blocks, from `running` (the simulator bills so; unverified at Verda).
    billing=BillingUnit(blocks_per_hour=6),
    # Instant Clusters: "up to 16" worker nodes "each with 8 GPUs" on InfiniBand (Verda's docs);
    # the simulator's cluster types are B300, B200 and H200.
    clusters=ClusterShapes(
        max_nodes=16,
        gpu_models=frozenset({"B300", "B200", "H200"}),
        gpus_per_node=frozenset({8}),
        interconnect=ClusterInterconnect.INFINIBAND,
    ),
    ssh_user="root",
    runs_startup_scripts=True,  # `POST /v1/scripts`, named by id in the create
    chooses_image=True,  # `image` in the create: an image type or id of `GET /v1/images`
    diagnose=diagnose,
    simulator=SimulatorMount(
        path="/verda",
        api_base="/v1",
        credentials=SIMULATOR_CREDENTIALS,
    ),
)
