"""The fake provider's spec: registered like any other, offered to orders only inside a test."""

from typing import Any

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from app.core.catalogue import ClusterInterconnect, Provider
from app.providers.base import ProviderAdapter
from app.providers.fake.adapter import PROVIDER, FakeAdapter
from app.providers.http import Connections
from app.providers.spec import ClusterShapes, ProviderSpec, Timeouts
from app.settings import ProviderSettings


class FakeSettings(ProviderSettings):
    """`AUTOPROVISION_FAKE_*`: only the poll period; there is nothing to reach or log in to."""

    model_config = SettingsConfigDict(env_prefix="AUTOPROVISION_FAKE_")

    poll_seconds: float = Field(default=0.5, ge=0.01, le=600)


def fake_spec(
    provider: Provider = PROVIDER, *, finds_vms_by_name: bool = True
) -> ProviderSpec[Any]:
    """A spec for a fake provider called `provider`; `finds_vms_by_name=False` makes one whose VMs,
    like QuantaCloud's, carry no name or tag. Offer it in a test with `registry.offering`."""

    def build_adapter(
        _settings: FakeSettings, _client: Connections, _timeouts: Timeouts
    ) -> ProviderAdapter:
        return FakeAdapter(provider, finds_vms_by_name=finds_vms_by_name)

    return ProviderSpec(
        provider=provider,
        display_name=str(provider).capitalize(),
        settings_model=FakeSettings,
        build_adapter=build_adapter,
        finds_vms_by_name=finds_vms_by_name,
        rate_limits=(),
        stock_read=(("GET", "/offers"),),
        create=None,
        simulator=None,
        for_tests=True,
        clusters=ClusterShapes(max_nodes=16, interconnect=ClusterInterconnect.INFINIBAND),
        runs_startup_scripts=True,
        chooses_image=True,
    )


SPEC = fake_spec()
