"""Service settings, read from AUTOPROVISION_* environment variables and `.env`."""

from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import AnyHttpUrl, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.open_models import catalogue as open_models

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./autoprovision.db"
# Demo mode reads every simulated provider this often when nobody waits for it, unless
# HISTORY_POLL_SECONDS is set: the demo feed shows a machine for 4 to 12 s, so most
# appearances are recorded and the Stock page fills within a minute of `make run`.
DEMO_HISTORY_POLL_SECONDS = 5.0
# Demo mode bills in minutes, so a newcomer sees money move and machines end within minutes.
DEMO_BILLING_HOUR_SECONDS = 60.0

# A setting of the watcher's inner timing: the defaults suit any deployment, and the reference
# lists these apart, after the ones an operator sets.
ADVANCED: dict[str, Any] = {"advanced": True}


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


class Settings(BaseSettings):
    """Everything the service can be configured with; see `.env.example`."""

    model_config = SettingsConfigDict(
        env_prefix="AUTOPROVISION_",
        env_file=".env",
        env_ignore_empty=True,
        extra="ignore",
    )

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL,
        description="The database. Must start with `sqlite+aiosqlite://` or "
        "`postgresql+asyncpg://`.",
    )
    # Sized for the requests admitted at once plus the background jobs, so an admitted request
    # does not queue for a connection.
    db_pool_size: int = Field(
        default=20, ge=1, le=1000, description="Database connections the process keeps open."
    )
    db_max_overflow: int = Field(
        default=10,
        ge=0,
        le=1000,
        description="Connections it may open beyond the pool in a burst (closed again when the "
        "pool is full). The sizing guide says how pool and overflow should cover the requests in "
        "flight.",
    )
    db_pool_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="How long a request waits for a free connection before it is answered `503` "
        "(code `overloaded`, with `Retry-After`).",
    )
    host: str = Field(
        default="127.0.0.1",
        description="Address to listen on; `0.0.0.0` for all interfaces. `serve --host` "
        "overrides it.",
    )
    port: int = Field(
        default=8000,
        ge=1,
        le=65535,
        description="Port to listen on (1-65535). `serve --port` overrides it.",
    )
    admin_api_key: SecretStr | None = Field(
        default=None,
        description="Fixed admin key (at least 16 characters). Unset: one is generated at first "
        "start and printed once.",
    )
    fee_percent: Decimal = Field(
        default=Decimal("0"),
        ge=0,
        le=100,
        description="Percentage (0-100) added to a provider's hourly price.",
    )
    fee_flat_per_hour: Decimal = Field(
        default=Decimal("0"),
        ge=0,
        le=1000,
        description="USD per hour (0-1000) added after the percentage.",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="`debug`, `info`, `warning` or `error`."
    )
    max_requests_in_flight: int = Field(
        default=16,
        ge=1,
        le=100_000,
        description="Requests the process serves at once; past it a request is answered at once "
        "with `503 overloaded` and `Retry-After: 1`, not queued. The sizing guide says what "
        "counts.",
    )
    max_requests_in_flight_per_client: int = Field(
        default=6,
        ge=1,
        le=100_000,
        description="Of `MAX_REQUESTS_IN_FLIGHT`, the places kept for each client (an account, "
        "else an address), so no client can take them all; the default is the six connections a "
        "browser opens.",
    )
    max_costly_reads_in_flight: int = Field(
        default=2,
        ge=1,
        le=1000,
        description="Stock summaries and estimates over a window longer than 7 days served at "
        "once, one per account; past it `503 overloaded` with `Retry-After: 1`.",
    )
    request_timeout_seconds: float = Field(
        default=10.0,
        ge=0.1,
        le=600,
        description="A request's head and body must arrive within this many seconds. A body "
        "that does not is answered `408`, code `request_timeout`, and its connection closed; a "
        "head that does not (a connection opened and left silent, or a header sent a byte at a "
        "time) has its connection closed.",
    )
    response_timeout_seconds: float = Field(
        default=10.0,
        ge=0.1,
        le=600,
        description="A client that takes no bytes of its answer for this long has its "
        "connection dropped (the event stream has its own `STREAM_SEND_TIMEOUT_SECONDS`).",
    )
    max_connections_per_client: int = Field(
        default=64,
        ge=1,
        le=100_000,
        description="Connections one client address may hold open at once (`autoprovision "
        "serve`); more are closed as they arrive, until some close. Behind a proxy every client "
        "has the proxy's address: raise it there, and let the proxy bound its clients.",
    )
    max_waiting_orders_per_account: int = Field(
        default=100,
        ge=1,
        le=100_000,
        description="Orders one account may have `waiting` at once; one more is `409 "
        "too_many_orders` until one deploys, expires or is cancelled.",
    )
    max_placements_per_hour: int = Field(
        default=120,
        ge=1,
        le=1_000_000,
        description="Orders one account may place in any hour, cancelled ones too, counted across "
        "replicas; one more is `429 too_many_placements`. Keep it above "
        "`MAX_WAITING_ORDERS_PER_ACCOUNT`.",
    )

    mode: Literal["demo", "live"] = Field(
        default="demo",
        description="`demo`: providers are the local simulators (credentials are ignored). "
        "`live`: the real providers; refuses to start without credentials for at least one.",
    )
    watcher: bool = Field(
        default=True,
        description="Poll, match and deploy in this process. `false` makes an API-only process.",
    )
    dry_run: bool = Field(
        default=False,
        description="Poll and match as usual but send no create and hold nothing; each order is "
        "told what it would have deployed, once per appearance of the offer, and keeps waiting. "
        "Also `autoprovision serve --dry-run`.",
    )
    sim_port: int = Field(
        default=8001,
        ge=1,
        le=65535,
        description="Where the simulators listen (demo mode, and `autoprovision sim`).",
    )
    sim_embedded: bool = Field(
        default=True,
        description="Demo mode serves the simulators from the service's own process. `false`: "
        "run `autoprovision sim --port $AUTOPROVISION_SIM_PORT` yourself, so they outlive a "
        "killed service.",
    )
    sim_tls: bool = Field(
        default=False,
        description="Demo mode with simulators you started with `autoprovision sim --tls`: "
        "reach them over HTTPS (needs `AUTOPROVISION_SIM_EMBEDDED=false` and their certificate "
        "in `AUTOPROVISION_PROVIDER_CA_FILE`).",
    )
    demo_feed: bool = Field(
        default=True,
        description="Demo mode places the demo orders and makes stock come and go. `false`: no "
        "demo orders, and stock only when you put it up through the simulators' control API.",
    )

    capacity_cooldown_seconds: float = Field(
        json_schema_extra=ADVANCED,
        default=5.0,
        ge=0,
        le=3600,
        description="After a capacity error, nothing is sent to that offer for this long.",
    )
    follow_seconds: float = Field(
        json_schema_extra=ADVANCED,
        default=3.0,
        ge=0.1,
        le=600,
        description="How often a deployed VM's status is read until it runs; also how often "
        "billing hours are paid and a terminate made on another replica is picked up.",
    )
    outcome_check_seconds: float = Field(
        json_schema_extra=ADVANCED,
        default=10.0,
        ge=0,
        le=3600,
        description="After a create with no clear answer, wait this long, then look the VM up "
        "by name or tag. Keep it above how late a provider makes a VM: at one that can neither "
        "name nor tag VMs, a VM that appears after the look-up is nobody's.",
    )
    waiting_refresh_seconds: float = Field(
        json_schema_extra=ADVANCED,
        default=1.0,
        ge=0.05,
        le=60,
        description="How often the watcher re-reads the waiting orders (it also does right "
        "after a place or cancel).",
    )
    reconcile_seconds: float = Field(
        json_schema_extra=ADVANCED,
        default=60.0,
        ge=1,
        le=3600,
        description="How often open holds and the providers' VMs are checked for anything left "
        "behind.",
    )
    delete_untracked_vms: bool = Field(
        default=False,
        description="Delete VMs that carry our tag but no order owns (otherwise they are "
        "reported in the log and the `autoprovision_untracked_vms` metric).",
    )
    leader_lease_seconds: float = Field(
        json_schema_extra=ADVANCED,
        default=10.0,
        ge=1,
        le=300,
        description="The watcher lease replicas compete for; a survivor takes over within about "
        "1.3 times this after the holder dies.",
    )
    stock_history_days: int = Field(
        default=90,
        ge=1,
        le=3650,
        description="Days of stock history kept (older closed intervals and coverage windows "
        "are pruned hourly); the longest window the stock endpoints and the estimate accept.",
    )

    # At least a week: a webhook's retries (a day and more) outlive the order they tell of.
    order_retention_days: int = Field(
        default=90,
        ge=7,
        le=36_500,
        description="Days an ended order (cancelled, expired, failed, terminated, lost) is kept "
        "(pruned hourly after). One that never held money goes entirely; one that did keeps its "
        "row and its machines for the ledger, which is never pruned, and loses its timeline, its "
        "events and its start-up script.",
    )

    billing_hour_seconds: float = Field(
        default=3600.0,
        ge=1,
        le=86400,
        description="How long a billed hour lasts (demo mode: 60 unless set). Every billing rule "
        "(grace, runway, limits, the providers' blocks) is measured in billed time, so a shorter "
        "hour speeds them all up together.",
    )
    low_balance_hours: float = Field(
        default=2.0,
        ge=0,
        le=8760,
        description="An account whose available balance pays its machines for fewer billed "
        "hours than this gets one `account.low_balance` event (stream, webhook) per crossing, "
        "and a banner on the dashboard.",
    )
    unpaid_grace_minutes: float = Field(
        default=10.0,
        ge=0,
        le=1440,
        description="A billing hour that cannot be paid: the machine runs on this long (billed "
        "minutes) for a top-up, which pays the hour; then it is terminated with reason "
        "`unpaid`.",
    )
    running_check_seconds: float = Field(
        json_schema_extra=ADVANCED,
        default=30.0,
        ge=0.1,
        le=3600,
        description="How often every running VM's status is read at its provider (one list call "
        "per provider, counted in the poll budget), to find machines the provider ended: their "
        "orders end `lost`, billing stopped when seen.",
    )
    cluster_assembly_minutes: float = Field(
        default=15.0,
        gt=0,
        le=1440,
        description="A cluster made of single VMs (at a provider that sells no cluster; the "
        "clusters guide says which) whose nodes are not all running with an IP this long "
        "after the creates were sent is taken apart: every node made is deleted, the hour "
        "refunded, and the order waits again.",
    )

    provider_balance_seconds: float = Field(
        default=60.0,
        ge=0,
        le=86400,
        description="How often our balance at each provider is read (also at start and after "
        "each create's outcome); before a create it must cover one hour. `0`: never read, "
        "nothing held back.",
    )
    provider_images_seconds: float = Field(
        default=3600.0,
        ge=0,
        le=86400,
        description="How often the providers' image lists are read (also at start), so each "
        "machine boots an image that runs it. `0`: never read; machines boot the configured "
        "image, and orders serving a model never deploy.",
    )
    history_poll_seconds: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="While no waiting order accepts a provider, its stock is still read this "
        "often, for the stock history; `0`: not read. Unset, demo mode uses `5`, so the Stock "
        "page fills within a minute.",
    )
    poll_plan: bool = Field(
        default=True,
        description="Providers whose `POLL_SECONDS` is not set have their stock reads planned "
        "by the poll budget from their published limits: as often as what the limits leave "
        "after everything else allows. `false`: each is read at its fixed default period.",
    )
    provider_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        le=120,
        description="Timeout of every provider call but creates.",
    )
    provider_ca_file: Path | None = Field(
        default=None,
        description="A PEM file of certificate authorities to trust for provider APIs besides "
        "the usual ones (a company proxy's, or `autoprovision sim --tls`'s certificate). "
        "Verification is never turned off.",
    )
    provider_create_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        le=300,
        description="Timeout of a create call; past it the outcome is unknown and the VM is "
        "looked up by name or tag instead of created again.",
    )

    secret_key: SecretStr | None = Field(
        default=None,
        description="Fernet keys, comma-separated (the first encrypts, all decrypt), sealing "
        "webhook secrets and start-up scripts at rest; replicas must share them. Going live says "
        "how to make one.",
    )
    secret_key_file: Path = Field(
        default=Path("autoprovision.key"),
        description="Used when `SECRET_KEY` is unset: a key is generated into this file (mode "
        "0600) the first time one is needed.",
    )
    webhook_allow_private: bool | None = Field(
        default=None,
        description="Allow webhook URLs on loopback and private networks, and plain `http` (for "
        "local testing). Unset: `true` in demo mode, `false` in live mode. Metadata "
        "(link-local) addresses are refused regardless.",
    )
    webhook_timeout_seconds: float = Field(
        default=15.0, gt=0, le=60, description="How long a receiver has to answer."
    )
    webhook_connect_timeout_seconds: float = Field(
        default=3.0,
        gt=0,
        le=60,
        description="How long a receiver has to accept the connection.",
    )
    webhook_first_byte_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        le=60,
        description="How long a receiver has to send its answer's headers (and each later part "
        "of it).",
    )
    webhook_max_in_flight_per_account: int = Field(
        default=4,
        ge=1,
        le=64,
        description="Deliveries one account may have out at once (each endpoint has one at a "
        "time), so one account's stalled receivers cannot hold up another's.",
    )
    webhook_retry_schedule: list[float] = Field(
        default=[0, 5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400],
        min_length=1,
        description="Seconds before each attempt (a JSON list; Standard Webhooks' schedule, the "
        "first one immediate); +-20 % jitter is added.",
    )
    webhook_poll_seconds: float = Field(
        json_schema_extra=ADVANCED,
        default=0.5,
        ge=0.05,
        le=60,
        description="How often the dispatcher looks for due deliveries (changes made by its own "
        "process wake it at once).",
    )
    webhook_disable_after_hours: float = Field(
        default=72.0,
        gt=0,
        le=24 * 30,
        description="An endpoint with no successful delivery for this long is disabled.",
    )
    public_url: AnyHttpUrl | None = Field(
        default=None,
        description="Where people open this service's dashboard (`https://gpus.example.com`): "
        "Slack and Discord messages link to the order there. Unset: they carry no link.",
    )
    docs_url: AnyHttpUrl | None = Field(
        default=None,
        description="Where this service's documentation (the site `make docs` builds from "
        "`docs/`) is hosted, e.g. `https://docs.example.com/autoprovision/`: the dashboard's "
        "footer and the API's OpenAPI description link to it. Unset: they point at `docs/` in "
        "the repository instead.",
    )
    stream_max_per_account: int = Field(
        default=5,
        ge=1,
        le=1000,
        description="Event streams an account may hold open on each replica; one more is a 429.",
    )
    stream_heartbeat_seconds: float = Field(
        default=15.0,
        ge=0.1,
        le=300,
        description="Seconds between the stream's heartbeat comments.",
    )
    stream_send_timeout_seconds: float = Field(
        default=30.0,
        ge=0.1,
        le=600,
        description="A stream client that takes longer than this to accept the next bytes is "
        "disconnected (it resumes from `Last-Event-ID`).",
    )

    models_file: Path | None = Field(
        default=None,
        description="A TOML file of open models in the shape of the shipped one"
        " (`app/open_models/open_models.toml`), added to them (the same id replaces one). One"
        " that cannot be used stops the start, naming the entry.",
    )

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

    @field_validator("models_file")
    @classmethod
    def _usable_models_file(cls, value: Path | None) -> Path | None:
        if value is not None:
            _models_in(value)
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


def _models_in(path: Path) -> list[open_models.OpenModel]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read ({exc})") from exc
    return open_models.parse(text, str(path))


def models_of(settings: Settings) -> list[open_models.OpenModel]:
    """The open models this service knows: those it ships with and the operator's file's."""
    extra = [] if settings.models_file is None else _models_in(settings.models_file)
    return open_models.merged(open_models.shipped(), extra)


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
