"""Service settings, read from AUTOPROVISION_* environment variables and `.env`."""

from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import AnyHttpUrl, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./autoprovision.db"
# Demo mode reads every simulated provider this often when nobody waits for it, unless
# HISTORY_POLL_SECONDS is set: the demo feed shows a machine for 4 to 12 s, so most
# appearances are recorded and the Stock page fills within a minute of `make run`.
DEMO_HISTORY_POLL_SECONDS = 5.0
# Demo mode bills in minutes, so a newcomer sees money move and machines end within minutes.
DEMO_BILLING_HOUR_SECONDS = 60.0


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

    def has_credentials(self) -> bool:
        """Whether every credential field is set."""
        return all(getattr(self, name) is not None for name in self.credential_fields)

    @classmethod
    def env_name(cls, field_name: str) -> str:
        """The environment variable that sets `field_name` (`AUTOPROVISION_VERDA_IMAGE`)."""
        return f"{cls.model_config.get('env_prefix', '')}{field_name}".upper()


class Settings(BaseSettings):
    """Everything the service can be configured with; see `.env.example`."""

    model_config = SettingsConfigDict(
        env_prefix="AUTOPROVISION_",
        env_file=".env",
        env_ignore_empty=True,
        extra="ignore",
    )

    database_url: str = DEFAULT_DATABASE_URL
    # Connections this process keeps open, and how many more it may open in a burst (those close
    # again when returned to a full pool). Sized for the requests admitted at once plus the
    # background jobs, so an admitted request does not queue for a connection.
    db_pool_size: int = Field(default=20, ge=1, le=1000)
    db_max_overflow: int = Field(default=10, ge=0, le=1000)
    db_pool_timeout_seconds: float = Field(default=10.0, gt=0, le=600)
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    admin_api_key: SecretStr | None = None
    fee_percent: Decimal = Field(default=Decimal("0"), ge=0, le=100)
    fee_flat_per_hour: Decimal = Field(default=Decimal("0"), ge=0, le=1000)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # Requests served at once; past it the answer is an immediate 503 with Retry-After.
    max_requests_in_flight: int = Field(default=16, ge=1, le=100_000)
    # A request's head and body must arrive within this (else 408, or the connection closes);
    # a response the client does not take for this long drops its connection.
    request_timeout_seconds: float = Field(default=10.0, ge=0.1, le=600)
    response_timeout_seconds: float = Field(default=10.0, ge=0.1, le=600)
    # Connections one client address may hold open at once; more are closed as they come.
    max_connections_per_client: int = Field(default=64, ge=1, le=100_000)
    # Orders one account may have waiting at once; past it, 409 too_many_orders.
    max_waiting_orders_per_account: int = Field(default=100, ge=1, le=100_000)

    mode: Literal["demo", "live"] = "demo"
    watcher: bool = True  # poll, match and deploy in this process (false: an API-only process)
    # Poll and match as usual, but send no create and hold nothing: each order is told what it
    # would have taken, once per appearance of the offer, and keeps waiting.
    dry_run: bool = False
    sim_port: int = Field(default=8001, ge=1, le=65535)
    sim_embedded: bool = True
    # Demo mode with simulators started on their own by `autoprovision sim --tls`: reach them
    # over HTTPS (trusting their certificate through `provider_ca_file`).
    sim_tls: bool = False
    demo_feed: bool = True

    capacity_cooldown_seconds: float = Field(default=5.0, ge=0, le=3600)
    follow_seconds: float = Field(default=3.0, ge=0.1, le=600)
    outcome_check_seconds: float = Field(default=10.0, ge=0, le=3600)
    waiting_refresh_seconds: float = Field(default=1.0, ge=0.05, le=60)
    reconcile_seconds: float = Field(default=60.0, ge=1, le=3600)
    delete_untracked_vms: bool = False
    leader_lease_seconds: float = Field(default=10.0, ge=1, le=300)
    # How many days of stock history (appearances and coverage) are kept and can be asked about.
    stock_history_days: int = Field(default=90, ge=1, le=3650)

    # Paying as machines run: how long a billed hour lasts (seconds; demo mode: 60 unless set),
    # the runway (available balance / what the running machines cost an hour) below which an
    # account gets an `account.low_balance` event, and how long a machine whose hour could not
    # be paid keeps running for a top-up before it is terminated.
    billing_hour_seconds: float = Field(default=3600.0, ge=1, le=86400)
    low_balance_hours: float = Field(default=2.0, ge=0, le=8760)
    unpaid_grace_minutes: float = Field(default=10.0, ge=0, le=1440)
    # How often every running VM's status is read at its provider (a list call where there is
    # one), to find machines the provider ended.
    running_check_seconds: float = Field(default=30.0, ge=0.1, le=3600)

    # How often our balance at each provider is read (also at start and after each create's
    # outcome); 0: never, and nothing is held back for it.
    provider_balance_seconds: float = Field(default=60.0, ge=0, le=86400)
    # While no waiting order accepts a provider, its stock is still read this often (seconds)
    # for the stock history; 0: not read then. Kept for `stock_history_days` days. Unless set,
    # demo mode reads at `DEMO_HISTORY_POLL_SECONDS` instead.
    history_poll_seconds: float = Field(default=30.0, ge=0, le=3600)
    # Stock reads of providers whose period is not set are planned by the poll budget; false:
    # each provider is read at its default period instead.
    poll_plan: bool = True
    provider_timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    # A PEM file of certificate authorities trusted for provider APIs besides the usual ones
    # (e.g. the simulators' `sim --tls` certificate, or a company proxy's). Verification is
    # never turned off.
    provider_ca_file: Path | None = None
    provider_create_timeout_seconds: float = Field(default=30.0, gt=0, le=300)

    # Fernet keys (comma-separated, the first encrypts) for webhook secrets at rest; without
    # one, a key is generated once into `secret_key_file`. Replicas must share the key. Demo
    # mode derives the demo account's API key from the first key, so it survives restarts.
    secret_key: SecretStr | None = None
    secret_key_file: Path = Path("autoprovision.key")
    webhook_allow_private: bool | None = None  # loopback/private receivers; default: demo mode
    webhook_timeout_seconds: float = Field(default=15.0, gt=0, le=60)
    # A receiver that accepts no connection, or sends no answer's headers, is given up on sooner.
    webhook_connect_timeout_seconds: float = Field(default=3.0, gt=0, le=60)
    webhook_first_byte_timeout_seconds: float = Field(default=10.0, gt=0, le=60)
    # Sends one account may have out at once (one per endpoint in any case): its receivers'
    # stalls hold up only its own share of the dispatcher.
    webhook_max_in_flight_per_account: int = Field(default=4, ge=1, le=64)
    # Standard Webhooks' schedule: seconds before each attempt, the first one immediate.
    webhook_retry_schedule: list[float] = Field(
        default=[0, 5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400], min_length=1
    )
    webhook_poll_seconds: float = Field(default=0.5, ge=0.05, le=60)
    webhook_disable_after_hours: float = Field(default=72.0, gt=0, le=24 * 30)
    # Where people reach this service's dashboard (`https://gpus.example.com`): chat
    # notifications link to the order there. Unset: they carry no link.
    public_url: AnyHttpUrl | None = None
    # Where this service's documentation (the site `make docs` builds from docs/) is hosted,
    # e.g. `https://docs.example.com/autoprovision/`: the dashboard's footer and the API's
    # OpenAPI description link to it. Unset: they point at docs/ in the repository instead.
    docs_url: AnyHttpUrl | None = None
    # The event stream (`GET /v1/events/stream`): open streams per account on each replica;
    # seconds between heartbeat comments; seconds a client may take to accept the next bytes
    # before it is disconnected (it resumes from Last-Event-ID).
    stream_max_per_account: int = Field(default=5, ge=1, le=1000)
    stream_heartbeat_seconds: float = Field(default=15.0, ge=0.1, le=300)
    stream_send_timeout_seconds: float = Field(default=30.0, ge=0.1, le=600)

    # Each registered provider's settings by its name (credentials, base URL, poll period...),
    # read from its own AUTOPROVISION_<NAME>_* variables (see `app/providers/<name>/spec.py`)
    # by `app.providers.registry.with_provider_settings`, which the composition root calls once.
    providers: dict[str, ProviderSettings] = Field(default_factory=dict)

    @field_validator("database_url")
    @classmethod
    def _supported_database(cls, value: str) -> str:
        if not value.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError(
                "database_url must start with sqlite+aiosqlite:// or postgresql+asyncpg://"
            )
        return value

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

    @field_validator("admin_api_key")
    @classmethod
    def _strong_admin_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("admin_api_key must be at least 16 characters")
        return value

    @field_validator("webhook_retry_schedule")
    @classmethod
    def _schedule_not_negative(cls, value: list[float]) -> list[float]:
        if any(delay < 0 or delay > 7 * 86400 for delay in value):
            raise ValueError("webhook_retry_schedule delays must be between 0 and 604800 seconds")
        return value

    @model_validator(mode="after")
    def _tls_simulators_run_apart(self) -> "Settings":
        if self.sim_tls and self.sim_embedded:
            raise ValueError(
                "sim_tls needs sim_embedded=false: the embedded simulators serve plain HTTP; "
                "start them with `autoprovision sim --tls` instead"
            )
        return self

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

    @property
    def sim_url(self) -> str:
        """Where demo mode finds the simulators."""
        return f"{'https' if self.sim_tls else 'http'}://127.0.0.1:{self.sim_port}"

    @property
    def is_sqlite(self) -> bool:
        """Whether the configured database is an SQLite file."""
        return self.database_url.startswith("sqlite")


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
