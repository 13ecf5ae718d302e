"""Response bodies of orders: an order as its owner and the admin see it, its timeline, and
what an order would be if placed now."""

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from app.api.stock_schemas import EstimateOut
from app.core.states import OrderEventKind
from app.services.order_payload import AlternativeOut, OrderFields


class OrderOut(OrderFields):
    """An order as its owner sees it (with the SSH public key it was given)."""

    ssh_public_key: str | None


class AdminOrderOut(OrderOut):
    """An order as the admin sees it: whose it is, too."""

    account_id: str


class OrderWithEstimateOut(OrderOut):
    """One order as `GET /v1/orders/{id}` shows it: with the expected wait while it waits
    (null otherwise), over the last 7 days, computed at most once a minute."""

    estimate: EstimateOut | None = None


class OrderPreviewOut(BaseModel):
    """What an order would be if placed now: the shapes it would take, and the start-up script
    `serve` would give it (a script you wrote yourself is not repeated)."""

    model: str | None
    prefer: str
    alternatives: list[AlternativeOut]
    serve_engine: str | None = None
    startup_script: str | None = None


class OrderEventOut(BaseModel):
    """One line of an order's timeline."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    kind: OrderEventKind
    message: str
    created_at: datetime
