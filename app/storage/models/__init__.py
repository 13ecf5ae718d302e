"""The database tables, as SQLAlchemy ORM models, one module per aggregate."""

from app.storage.models.base import Base
from app.storage.models.coordination import IdempotencyKey, Lease
from app.storage.models.events import (
    AccountEvent,
    EventCounter,
    PublishedEvent,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from app.storage.models.money import Account, AdminKey, Hold, LedgerEntry
from app.storage.models.orders import Attempt, Order, OrderEvent
from app.storage.models.stock import (
    OfferSnapshot,
    ProviderBalance,
    ProviderImages,
    StockCoverage,
    StockDay,
    StockInterval,
    StoredForecast,
)

__all__ = [
    "Account",
    "AccountEvent",
    "AdminKey",
    "Attempt",
    "Base",
    "EventCounter",
    "Hold",
    "IdempotencyKey",
    "Lease",
    "LedgerEntry",
    "OfferSnapshot",
    "Order",
    "OrderEvent",
    "ProviderBalance",
    "ProviderImages",
    "PublishedEvent",
    "StockCoverage",
    "StockDay",
    "StockInterval",
    "StoredForecast",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookEndpoint",
    "WebhookEvent",
]
