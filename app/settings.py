"""Service settings, read from AUTOPROVISION_* environment variables and `.env`."""

from decimal import Decimal
from functools import lru_cache
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./autoprovision.db"


class Settings(BaseSettings):
    """Everything the service can be configured with; see `.env.example`."""

    model_config = SettingsConfigDict(
        env_prefix="AUTOPROVISION_",
        env_file=".env",
        env_ignore_empty=True,
        extra="ignore",
    )

    database_url: str = DEFAULT_DATABASE_URL
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    admin_api_key: SecretStr | None = None
    fee_percent: Decimal = Field(default=Decimal("0"), ge=0, le=100)
    fee_flat_per_hour: Decimal = Field(default=Decimal("0"), ge=0, le=1000)
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    @field_validator("database_url")
    @classmethod
    def _supported_database(cls, value: str) -> str:
        if not value.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError(
                "database_url must start with sqlite+aiosqlite:// or postgresql+asyncpg://"
            )
        return value

    @field_validator("admin_api_key")
    @classmethod
    def _strong_admin_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("admin_api_key must be at least 16 characters")
        return value

    @property
    def is_sqlite(self) -> bool:
        """Whether the configured database is an SQLite file."""
        return self.database_url.startswith("sqlite")


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
