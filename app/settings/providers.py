"""The settings every provider's own model has (each provider's package adds its fields)."""

from typing import ClassVar

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ProviderSettings(BaseSettings):
    """One provider's settings, read from its own `AUTOPROVISION_<NAME>_*` variables and `.env`.

    Every subclass sets `env_prefix` and `poll_seconds`' default. `poll_seconds` None (or not
    set while `AUTOPROVISION_POLL_PLAN` is on): stock is read as often as the provider's
    published limits allow (the poll budget); else every so many seconds, as told.
    """

    model_config = SettingsConfigDict(env_file=".env", env_ignore_empty=True, extra="ignore")

    # Fields that must all be set for the provider to be used (live mode).
    credential_fields: ClassVar[tuple[str, ...]] = ()

    poll_seconds: float | None = Field(default=None, ge=0.01, le=600)
    # A single machine not running this long after its create was accepted is deleted, its
    # hours refunded, and its order waits again; each provider sets its own default.
    boot_deadline_minutes: float = Field(default=20.0, gt=0, le=1440)

    def has_credentials(self) -> bool:
        """Whether every credential field is set."""
        return all(getattr(self, name) is not None for name in self.credential_fields)

    @classmethod
    def env_name(cls, field_name: str) -> str:
        """The environment variable that sets `field_name` (`AUTOPROVISION_VERDA_IMAGE`)."""
        return f"{cls.model_config.get('env_prefix', '')}{field_name}".upper()
