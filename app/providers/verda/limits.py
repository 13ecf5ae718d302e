"""Verda's published rate limits, and the requests a stock read and a create send.

Verda counts authenticated requests: 500 a minute per project, 60 a minute per method and full
path (so each instance type's availability path is a bucket of its own), 120 a minute for
`GET /v1/instances`.
"""

from urllib.parse import quote

from app.providers.budget import (
    Published,
    RateLimit,
    Request,
    StockRead,
    every_request,
    only,
    per_endpoint,
)

INSTANCES: Request = ("GET", "/instances")
CREATE: Request = ("POST", "/instances")
RATE_LIMITS = (
    RateLimit(500, 60, "per project", every_request("project")),
    RateLimit(60, 60, "per (method, full path)", per_endpoint(except_=(INSTANCES,))),
    RateLimit(120, 60, "GET /v1/instances", only(*INSTANCES)),
)
FULL_READ: StockRead = (("GET", "/instance-availability"),)
# Instant Clusters' stock: every cluster type in every location, a path (a bucket) of its own.
CLUSTER_READ: StockRead = (("GET", "/cluster-availability"),)
STOCK_PATHS = frozenset({"instance-availability", "cluster-availability"})


def type_read(instance_type: str) -> StockRead:
    """The stock read of one instance type: `true` when it is in stock anywhere."""
    return (("GET", f"/instance-availability/{quote(instance_type, safe='')}"),)


def is_stock_read(method: str, path: str) -> bool:
    """Whether a request is part of a stock read (the full list or one type's, of instances or
    of clusters)."""
    first = path.split("/")[1:2]  # "/cluster-availability/16B200" -> ["cluster-availability"]
    return method == "GET" and bool(first) and first[0] in STOCK_PATHS


PUBLISHED = Published(RATE_LIMITS, CREATE, is_stock_read)
