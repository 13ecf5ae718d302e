"""The fake provider's spec: registered like any other, offered to orders only inside a test."""

from typing import Any

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from app.core.catalogue import Provider
from app.providers.base import ProviderAdapter
from app.providers.fake.adapter import PROVIDER, FakeAdapter
from app.providers.http import Connections
from app.providers.spec import ProviderSettings, ProviderSpec, Timeouts


class FakeSettings(ProviderSettings):
    """`AUTOPROVISION_FAKE_*`: only the poll period; there is nothing to reach or log in to."""

    model_config = SettingsConfigDict(env_prefix="AUTOPROVISION_FAKE_")

    poll_seconds: float = Field(default=0.5, ge=0.01, le=600)


def fake_spec(provider: Provider = PROVIDER, *, names_vms: bool = True) -> ProviderSpec[Any]:
    """A spec for a fake provider called `provider`; `names_vms=False` makes one whose VMs,
    like QuantaCloud's, carry no name or tag. Offer it in a test with `registry.offering`."""

    def build_adapter(
        _settings: FakeSettings, _client: Connections, _timeouts: Timeouts
    ) -> ProviderAdapter:
        return FakeAdapter(provider, names_vms=names_vms)

    return ProviderSpec(
        provider=provider,
        display_name=str(provider).capitalize(),
        settings_model=FakeSettings,
        build_adapter=build_adapter,
        names_vms=names_vms,
        rate_limits=(),
        stock_read=(("GET", "/offers"),),
        create=None,
        simulator=None,
        for_tests=True,
    )


SPEC = fake_spec()
