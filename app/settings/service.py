"""The service itself, its database, and the bounds on what its API serves."""

from decimal import Decimal
from pathlib import Path
from typing import ClassVar, Literal, Self

from pydantic import AnyHttpUrl, Field, SecretStr, field_validator, model_validator

from app.open_models import catalogue as open_models
from app.settings.group import SettingsGroup

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./autoprovision.db"


class ServiceSettings(SettingsGroup):
    """What the service is: its mode, where it listens, its keys, fees and links."""

    title: ClassVar[str] = "Mode, address and keys"

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
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="`debug`, `info`, `warning` or `error`."
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
    public_url: AnyHttpUrl | None = Field(
        default=None,
        description="Where people and machines reach this service (`https://gpus.example.com`): "
        "Slack and Discord messages link to the order there, and machines report how far their "
        "start-up script got. Unset: no links, and in live mode no reports.",
    )
    public_url_allow_http: bool = Field(
        default=False,
        description="Live mode refuses a plain-`http` `PUBLIC_URL`, since machines send it their "
        "report tokens; `true` allows one on a private network.",
    )
    docs_url: AnyHttpUrl | None = Field(
        default=None,
        description="Where the site `make docs` builds is hosted "
        "(`https://docs.example.com/autoprovision/`), for the dashboard's footer and the OpenAPI "
        "description to link to; unset, they link to `docs/` in the repository.",
    )
    models_file: Path | None = Field(
        default=None,
        description="A TOML file of open models in the shape of the shipped one"
        " (`app/open_models/open_models.toml`), added to them (the same id replaces one). One"
        " that cannot be used stops the start, naming the entry.",
    )

    @model_validator(mode="after")
    def _reports_over_https_in_live_mode(self) -> Self:
        url = self.public_url
        plain = url is not None and url.scheme == "http"
        if self.mode == "live" and plain and not self.public_url_allow_http:
            raise ValueError(
                "public_url must be https in live mode: machines send their report tokens "
                "to it (AUTOPROVISION_PUBLIC_URL_ALLOW_HTTP=true allows http on a private "
                "network)"
            )
        return self

    @field_validator("admin_api_key")
    @classmethod
    def _strong_admin_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("admin_api_key must be at least 16 characters")
        return value

    @field_validator("models_file")
    @classmethod
    def _usable_models_file(cls, value: Path | None) -> Path | None:
        if value is not None:
            models_in(value)
        return value


class DatabaseSettings(SettingsGroup):
    """The database, its connection pool, and how long what it holds is kept."""

    title: ClassVar[str] = "The database"

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

    @field_validator("database_url")
    @classmethod
    def _supported_database(cls, value: str) -> str:
        if not value.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError(
                "database_url must start with sqlite+aiosqlite:// or postgresql+asyncpg://"
            )
        return value

    @property
    def is_sqlite(self) -> bool:
        """Whether the configured database is an SQLite file."""
        return self.database_url.startswith("sqlite")


class RequestBoundsSettings(SettingsGroup):
    """How much the API serves at once, how long a request may take, and each account's caps."""

    title: ClassVar[str] = "Requests and their bounds"

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
        "serve`); more are closed as they arrive. Behind a proxy, raise it (the sizing guide "
        "says how far).",
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


def models_in(path: Path) -> list[open_models.OpenModel]:
    """The open models in the operator's TOML file at `path`; ValueError naming what is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read ({exc})") from exc
    return open_models.parse(text, str(path))
