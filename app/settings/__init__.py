"""Service settings, read from AUTOPROVISION_* environment variables and `.env`.

`Settings` is made of groups (`app/settings/<part>.py`): each field keeps its flat variable
name and is read as `settings.<name>`, and the reference lists the fields group by group.
"""

from functools import lru_cache
from typing import Any

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.open_models import catalogue as open_models
from app.settings.delivery import StreamSettings, WebhookSettings
from app.settings.demo import DEMO_BILLING_HOUR_SECONDS, DEMO_HISTORY_POLL_SECONDS, DemoSettings
from app.settings.group import SettingsGroup
from app.settings.providers import ProviderSettings
from app.settings.service import (
    DEFAULT_DATABASE_URL,
    DatabaseSettings,
    RequestBoundsSettings,
    ServiceSettings,
    models_in,
)
from app.settings.watcher import BillingSettings, ProviderCallSettings, WatcherTimingSettings

__all__ = [
    "DEFAULT_DATABASE_URL",
    "GROUPS",
    "ProviderSettings",
    "Settings",
    "SettingsGroup",
    "get_settings",
    "models_of",
]


# Its groups, in the order the reference and `.env.example` list them (`GROUPS`).
class Settings(
    ServiceSettings,
    DatabaseSettings,
    RequestBoundsSettings,
    BillingSettings,
    ProviderCallSettings,
    WebhookSettings,
    StreamSettings,
    DemoSettings,
    WatcherTimingSettings,
    BaseSettings,
):
    """Everything the service can be configured with; see `.env.example`."""

    model_config = SettingsConfigDict(
        env_prefix="AUTOPROVISION_",
        env_file=".env",
        env_ignore_empty=True,
        extra="ignore",
    )

    # Each registered provider's settings by its name (credentials, base URL, poll period...),
    # read from its own AUTOPROVISION_<NAME>_* variables (see `app/providers/<name>/spec.py`)
    # by `app.providers.registry.with_provider_settings`, which the composition root calls once.
    providers: dict[str, ProviderSettings] = Field(default_factory=dict)

    @field_validator("providers", mode="before")
    @classmethod
    def _loaded_provider_settings(cls, value: Any) -> Any:
        # A bare ProviderSettings would read variables without a provider's prefix.
        if isinstance(value, dict) and not all(
            isinstance(v, ProviderSettings) for v in value.values()
        ):
            raise ValueError(
                "providers holds loaded provider settings: give them to "
                "app.providers.registry.with_provider_settings"
            )
        return value

    @model_validator(mode="after")
    def _demo_defaults(self) -> "Settings":
        if self.mode == "demo" and "history_poll_seconds" not in self.model_fields_set:
            self.history_poll_seconds = DEMO_HISTORY_POLL_SECONDS
        if self.mode == "demo" and "billing_hour_seconds" not in self.model_fields_set:
            self.billing_hour_seconds = DEMO_BILLING_HOUR_SECONDS
        return self

    @property
    def own_ports(self) -> frozenset[int]:
        """This service's port and its simulators': webhooks never go to them on a local address."""
        return frozenset({self.port, self.sim_port})

    @property
    def allows_private_webhooks(self) -> bool:
        """Whether webhooks may go to loopback and private addresses (and over plain http)."""
        if self.webhook_allow_private is None:
            return self.mode == "demo"
        return self.webhook_allow_private


GROUPS: tuple[type[SettingsGroup], ...] = tuple(
    base for base in Settings.__bases__ if issubclass(base, SettingsGroup)
)


def models_of(settings: Settings) -> list[open_models.OpenModel]:
    """The open models this service knows: those it ships with and the operator's file's."""
    extra = [] if settings.models_file is None else models_in(settings.models_file)
    return open_models.merged(open_models.shipped(), extra)


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
