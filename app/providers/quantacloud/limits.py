"""QuantaCloud's published rate limit, and the requests a stock read and a create send."""

from app.providers.budget import Published, RateLimit, Request, StockRead, every_request
from app.providers.quantacloud import facts

RATE_LIMITS = (
    RateLimit(
        facts.RATE_LIMIT_REQUESTS, facts.RATE_LIMIT_WINDOW_SECONDS, "per IP", every_request("ip")
    ),
)
CREATE: Request = ("POST", facts.DEPLOYMENTS)
STOCK_READ: StockRead = (("GET", facts.OFFERS),)


def is_stock_read(method: str, path: str) -> bool:
    """Whether a request is part of a stock read."""
    return (method, path) in STOCK_READ


PUBLISHED = Published(RATE_LIMITS, CREATE, is_stock_read)
