"""How what happens reaches people: webhooks and the event stream."""

from typing import ClassVar

from pydantic import Field, field_validator

from app.settings.group import SettingsGroup


class WebhookSettings(SettingsGroup):
    """How webhooks are sent: where they may go, how long a receiver has, and how often they
    are tried again."""

    title: ClassVar[str] = "Webhooks"

    webhook_allow_private: bool | None = Field(
        default=None,
        description="Allow webhook URLs on loopback and private networks, and plain `http`, for "
        "local testing (link-local metadata addresses are refused regardless). Unset: `true` in "
        "demo mode, `false` in live mode.",
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
    webhook_disable_after_hours: float = Field(
        default=72.0,
        gt=0,
        le=24 * 30,
        description="An endpoint with no successful delivery for this long is disabled.",
    )

    @field_validator("webhook_retry_schedule")
    @classmethod
    def _schedule_not_negative(cls, value: list[float]) -> list[float]:
        if any(delay < 0 or delay > 7 * 86400 for delay in value):
            raise ValueError("webhook_retry_schedule delays must be between 0 and 604800 seconds")
        return value


class StreamSettings(SettingsGroup):
    """The event stream (`GET /v1/events/stream`): how many an account may hold open, and how
    slow a client may be."""

    title: ClassVar[str] = "The event stream"

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
