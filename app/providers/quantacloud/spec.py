"""QuantaCloud as the service sees it: its settings, published limits and simulator, in one
`SPEC`."""

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from app.core.metering import BillingUnit
from app.providers.base import ProviderAdapter
from app.providers.http import Connections
from app.providers.quantacloud import facts, limits
from app.providers.quantacloud.adapter import QuantaCloudAdapter
from app.providers.quantacloud.doctor import diagnose
from app.providers.quantacloud.parse import PROVIDER
from app.providers.spec import ProviderSpec, SimulatorMount, Timeouts
from app.settings import ProviderSettings


class QuantaCloudSettings(ProviderSettings):
    """`AUTOPROVISION_QUANTACLOUD_*`: where QuantaCloud's API is, our key, the poll period."""

    model_config = SettingsConfigDict(env_prefix="AUTOPROVISION_QUANTACLOUD_")
    credential_fields = ("api_key",)

    base_url: str = Field(default=facts.BASE_URL, description="QuantaCloud API.")
    api_key: SecretStr | None = Field(default=None, description="QuantaCloud API key.")
    # One stock read is one page of offers: 1,800 per 15 min against 3,000 per IP.
    # Used when set, or with AUTOPROVISION_POLL_PLAN=false; otherwise the poll budget plans.
    poll_seconds: float | None = Field(
        default=0.5,
        ge=0.1,
        le=600,
        description="Set: QuantaCloud's stock is read at this fixed period (seconds) instead of "
        "as the poll budget plans (3,000 requests per 15 minutes per IP). The default applies "
        "only with `AUTOPROVISION_POLL_PLAN=false`.",
    )
    # It says a deployment is active in about 3 minutes, about 10 for 8-GPU boxes; it bills
    # the hour begun from the create, so waiting within that hour costs nothing more.
    boot_deadline_minutes: float = Field(
        default=30.0,
        gt=0,
        le=1440,
        description="A machine not running with an IP this many minutes after QuantaCloud "
        "accepted its create (or found the VM of an unclear one) is deleted, what was paid for "
        "it refunded, and its order waits again. QuantaCloud says a deployment is `active` in "
        "about 3 minutes, about 10 for 8-GPU machines.",
    )


# What its simulator (`app/simulators/quantacloud/`) accepts; the simulator reads them here.
SIMULATOR_CREDENTIALS = {"api_key": "sim-key"}


def build_adapter(
    settings: QuantaCloudSettings, client: Connections, timeouts: Timeouts
) -> ProviderAdapter:
    """A QuantaCloud adapter over `client` (the settings must hold the API key)."""
    if settings.api_key is None:
        raise ValueError("QuantaCloud needs an API key")
    return QuantaCloudAdapter(
        client,
        base_url=settings.base_url,
        api_key=settings.api_key,
        timeout=timeouts.read,
        create_timeout=timeouts.create,
    )


SPEC = ProviderSpec(
    provider=PROVIDER,
    display_name="QuantaCloud",
    settings_model=QuantaCloudSettings,
    build_adapter=build_adapter,
    finds_vms_by_name=False,  # its deployments carry no name, label or tag
    rate_limits=limits.RATE_LIMITS,
    stock_read=limits.STOCK_READ,
    create=limits.CREATE,
    # Per hour begun, from the accepted create (prepaid hourly credit).
    billing=BillingUnit(blocks_per_hour=1, from_accepted=True),
    ssh_user=facts.SSH_USER,
    diagnose=diagnose,
    simulator=SimulatorMount(
        path="/quantacloud",
        api_base=facts.API_PATH,
        credentials=SIMULATOR_CREDENTIALS,
    ),
)
