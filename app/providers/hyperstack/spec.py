"""Hyperstack as the service sees it: its settings, published limits and simulator, in one
`SPEC`."""

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from app.core.market import MAX_NODES
from app.core.metering import BillingUnit
from app.providers.base import ProviderAdapter
from app.providers.http import Connections
from app.providers.hyperstack import limits
from app.providers.hyperstack.adapter import HyperstackAdapter
from app.providers.hyperstack.doctor import diagnose
from app.providers.hyperstack.parse import PROVIDER
from app.providers.spec import ClusterShapes, ProviderSpec, SimulatorMount, Timeouts
from app.settings import ProviderSettings


class HyperstackSettings(ProviderSettings):
    """`AUTOPROVISION_HYPERSTACK_*`: the API, our key, environments, key pair, image, period."""

    model_config = SettingsConfigDict(env_prefix="AUTOPROVISION_HYPERSTACK_")
    credential_fields = ("api_key",)

    base_url: str = Field(
        default="https://infrahub-api.nexgencloud.com/v1", description="Hyperstack API."
    )
    api_key: SecretStr | None = Field(default=None, description="Hyperstack API key.")
    environment: str = Field(
        default="autoprovision-{region}",
        description="Environment name; `{region}` becomes the region in lower case. A "
        "Hyperstack environment fixes the region, so the service uses (and creates when "
        "missing) one per region.",
    )
    key_name: str = Field(
        default="autoprovision",
        description="Key pair used when an order carries no SSH key (must exist in the "
        "environment).",
    )
    image: str = Field(
        default="Ubuntu Server 22.04 LTS R535 CUDA 12.2",
        description="OS image Hyperstack VMs boot.",
    )
    # One stock read is two requests (flavors and stocks): 240 a minute against 500 per IP.
    # Used when set, or with AUTOPROVISION_POLL_PLAN=false; otherwise the poll budget plans.
    poll_seconds: float | None = Field(
        default=0.5,
        ge=0.1,
        le=600,
        description="Set: Hyperstack's stock is read at this fixed period (seconds) instead of "
        "as the poll budget plans (500 requests a minute per IP; a read is two requests). The "
        "default applies only with `AUTOPROVISION_POLL_PLAN=false`.",
    )
    # Its Terraform provider waits 5 minutes for a VM to leave CREATING/BUILD, and clients
    # wait up to 10 for it to be ACTIVE with a public IP: twice that.
    boot_deadline_minutes: float = Field(
        default=20.0,
        gt=0,
        le=1440,
        description="A single machine not running with an IP this many minutes after "
        "Hyperstack accepted its create (or found the VM of an unclear one) is deleted, what "
        "was paid for it refunded, and its order waits again. One still being created refuses "
        "deletes: it is deleted once it can be, unless it runs first.",
    )


# What its simulator (`app/simulators/hyperstack/`) accepts; the simulator reads them here.
SIMULATOR_CREDENTIALS = {"api_key": "sim-key"}


def build_adapter(
    settings: HyperstackSettings, client: Connections, timeouts: Timeouts
) -> ProviderAdapter:
    """A Hyperstack adapter over `client` (the settings must hold the API key)."""
    if settings.api_key is None:
        raise ValueError("Hyperstack needs an API key")
    return HyperstackAdapter(
        client,
        base_url=settings.base_url,
        api_key=settings.api_key,
        environment=settings.environment,
        key_name=settings.key_name,
        image=settings.image,
        timeout=timeouts.read,
        create_timeout=timeouts.create,
    )


SPEC = ProviderSpec(
    provider=PROVIDER,
    display_name="Hyperstack",
    settings_model=HyperstackSettings,
    build_adapter=build_adapter,
    finds_vms_by_name=True,
    rate_limits=limits.RATE_LIMITS,
    stock_read=limits.STOCK_READ,
    create=limits.CREATE,
    # Per minute, from ACTIVE (its billing usage is per minute).
    billing=BillingUnit(blocks_per_hour=60),
    ssh_user="ubuntu",
    # No cluster product: N of its VMs created together, in one region, with no fabric between.
    clusters=ClusterShapes(max_nodes=MAX_NODES, assembled=True),
    runs_startup_scripts=True,  # `user_data` (cloud-init) in the create
    chooses_image=True,  # `image_name` in the create, from `GET /core/images`
    diagnose=diagnose,
    simulator=SimulatorMount(
        path="/hyperstack",
        api_base="/v1",
        credentials=SIMULATOR_CREDENTIALS,
    ),
)
