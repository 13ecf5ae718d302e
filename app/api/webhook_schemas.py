"""Request and response bodies of the webhook endpoints API."""

from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    field_validator,
)

from app.core.states import WebhookEventType, WebhookFormat
from app.core.text import MultiLine, OneLine
from app.services.webhooks.endpoints import EndpointChanges

MAX_URL_LENGTH = 2048

WebhookUrl = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_URL_LENGTH),
    OneLine,
]
Description = Annotated[str, StringConstraints(strip_whitespace=True, max_length=500), MultiLine]


def _distinct(values: list[WebhookEventType] | None) -> list[WebhookEventType] | None:
    return None if values is None else list(dict.fromkeys(values))


EventTypes = Annotated[
    list[WebhookEventType] | None,
    Field(min_length=1, description="The event types to send; omit (or null) for all of them."),
    AfterValidator(_distinct),
]


Format = Annotated[
    WebhookFormat,
    Field(
        description="The body sent: `standard` (Standard Webhooks' JSON event), or `slack` / "
        "`discord` (a message those apps' incoming webhooks show). Signed either way."
    ),
]


class EndpointCreate(BaseModel):
    """Body of `POST /v1/webhook-endpoints`."""

    model_config = ConfigDict(extra="forbid")

    url: WebhookUrl
    events: EventTypes = None
    description: Description | None = None
    format: Format = WebhookFormat.STANDARD


class EndpointUpdate(BaseModel):
    """Body of `PATCH /v1/webhook-endpoints/{id}`: only the fields sent change."""

    model_config = ConfigDict(extra="forbid")

    url: WebhookUrl | None = None
    events: EventTypes = None
    enabled: StrictBool | None = None
    description: Description | None = None
    format: Format | None = None

    @field_validator("url", "enabled", "format", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        # Only a field sent is validated: omitted, it keeps its value; null cannot be stored.
        if value is None:
            raise ValueError("must not be null; leave the field out to keep its value")
        return value

    def changes(self) -> EndpointChanges:
        """The fields sent, as the services take a change."""
        return EndpointChanges(sent=frozenset(self.model_fields_set), **self.model_dump())


class EndpointOut(BaseModel):
    """A webhook endpoint; its secret is shown only when created or rotated."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    url: str
    events: list[str] | None
    description: str | None
    format: WebhookFormat
    enabled: bool
    disabled_reason: str | None
    previous_secret_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime


class EndpointWithSecret(EndpointOut):
    """An endpoint with its signing secret: verify deliveries with it (Standard Webhooks)."""

    secret: str


class AttemptOut(BaseModel):
    """One HTTP request of a delivery."""

    model_config = ConfigDict(from_attributes=True)

    attempted_at: datetime
    status_code: int | None
    duration_ms: int
    response_body: str | None
    error: str | None


class DeliveryOut(BaseModel):
    """One event on its way to one endpoint, with every attempt so far (newest last)."""

    id: str
    endpoint_id: str
    event_id: str
    event_type: str
    status: str
    next_attempt_at: datetime | None
    created_at: datetime
    attempts: list[AttemptOut]


class AccountEventOut(BaseModel):
    """Something that happened to the account outside any order."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    kind: str
    message: str
    created_at: datetime
