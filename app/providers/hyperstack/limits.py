"""Hyperstack's published rate limit, and the requests a stock read and a create send."""

from app.providers.budget import Published, RateLimit, Request, StockRead, every_request

RATE_LIMITS = (RateLimit(500, 60, "per IP", every_request("ip")),)
CREATE: Request = ("POST", "/core/virtual-machines")
STOCK_READ: StockRead = (("GET", "/core/flavors"), ("GET", "/core/stocks"))


def is_stock_read(method: str, path: str) -> bool:
    """Whether a request is part of a stock read."""
    return (method, path) in STOCK_READ


PUBLISHED = Published(RATE_LIMITS, CREATE, is_stock_read)
