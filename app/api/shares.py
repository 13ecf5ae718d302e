"""Shares of the request bounds: who a request counts against, and a count of places in which
no one of them holds more than its share.

A request counts against its account when its API key is one this process has seen
authenticate (`KnownKeys`, filled by the auth dependencies: no database read before the
request is let in), and against its client's address otherwise: a request without a key, or
with a key not seen yet or made up. So a client cannot get a share per key it invents, and an
account's requests from many addresses are still one share. IPv6 addresses count by /64,
what one host or customer is usually given.
"""

import ipaddress
from collections import Counter, OrderedDict

from starlette.types import Scope

from app.support.security import hash_api_key

ADMIN_SHARE = "admin"
# Keys remembered at most (the least recently used go first); one is about 150 bytes.
KNOWN_KEYS_KEPT = 65_536


def account_share(account_id: str) -> str:
    """The share of an account's requests."""
    return f"account {account_id}"


def address_share(scope: Scope) -> str:
    """The share of the requests of a client address without a known key."""
    client = scope.get("client")
    if not client:
        return "address unknown"
    host = str(client[0])
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"address {host}"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return f"address {address.ipv4_mapped}"
        return f"address {ipaddress.IPv6Network((address, 64), strict=False)}"
    return f"address {address}"


def bearer_key(scope: Scope) -> str | None:
    """The API key of the request's `Authorization: Bearer` header, as the auth reads it."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, key = value.decode("latin-1").partition(" ")
            return key if scheme.lower() == "bearer" and key else None
    return None


class KnownKeys:
    """The shares of the API keys this process has seen authenticate, by each key's hash."""

    def __init__(self, kept: int = KNOWN_KEYS_KEPT) -> None:
        self.kept = kept
        self._shares: OrderedDict[str, str] = OrderedDict()

    def learn(self, api_key: str, share: str) -> None:
        """`api_key` authenticated as `share`."""
        digest = hash_api_key(api_key)
        self._shares[digest] = share
        self._shares.move_to_end(digest)
        while len(self._shares) > self.kept:
            self._shares.popitem(last=False)

    def forget(self, api_key: str) -> None:
        """`api_key` did not authenticate (the admin key was reset): its requests count
        against their address again."""
        self._shares.pop(hash_api_key(api_key), None)

    def share_of(self, scope: Scope) -> str:
        """Who the request counts against: its key's account when known, else its address."""
        key = bearer_key(scope)
        if key is not None:
            digest = hash_api_key(key)
            share = self._shares.get(digest)
            if share is not None:
                self._shares.move_to_end(digest)
                return share
        return address_share(scope)


class Places:
    """At most `limit` places held at once. A share holding `per_share` or more takes another
    only while more than `per_share` places stay free: a client alone may use the spare room,
    and any other client still finds its part free (work-conserving, unlike a flat cap)."""

    def __init__(self, limit: int, per_share: int) -> None:
        self.limit = limit
        self.per_share = per_share
        self.held = 0
        self.by_share: Counter[str] = Counter()

    def full_for(self, share: str) -> str | None:
        """Why `share` may not take a place now (`"client"`: it holds its part already;
        `"process"`: every place is held), or None when it may."""
        if self.held >= self.limit:
            return "process"
        if self.by_share[share] >= self.per_share and self.limit - self.held <= self.per_share:
            return "client"
        return None

    def take(self, share: str) -> None:
        """Hold a place for `share` (after `full_for` said it may)."""
        self.held += 1
        self.by_share[share] += 1

    def give_back(self, share: str) -> None:
        """Give back a place `share` held."""
        self.held -= 1
        self.by_share[share] -= 1
        if self.by_share[share] <= 0:
            del self.by_share[share]
