"""What a provider says is left of its rate limits, and holding back before a 429 because of it.

Some providers (Verda) report on every answer, in the IETF `RateLimit` header, what is left of
each bucket the request counted against and when it resets:
`RateLimit: "project";r=486;t=37, "endpoint";r=48;t=37`. A bucket named `endpoint` is the
request's own (method, path); any other is shared by every counted request. A request that
would find a bucket used up is not sent: it fails at once as rate limited for the time left, as
if the provider had answered 429, without spending a request on learning it. Shared buckets
keep `CREATE_RESERVE` requests for creates, which never wait here.
"""

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

CREATE_RESERVE = 2  # of a shared bucket, left for the creates a burst of stock can need
ENDPOINT = "endpoint"
_ITEM = re.compile(r'^\s*"?(?P<name>[A-Za-z0-9_.*-]+)"?\s*(?P<params>(?:;[^;,]*)*)\s*$')


def parse_rate_limit(value: str) -> dict[str, tuple[int, float]]:
    """{bucket: (remaining, seconds to reset)} from a `RateLimit` header value; items that do
    not say both are left out."""
    buckets: dict[str, tuple[int, float]] = {}
    for item in value.split(","):
        match = _ITEM.match(item)
        if match is None:
            continue
        params: dict[str, str] = {}
        for param in match["params"].split(";")[1:]:
            key, _, raw = param.partition("=")
            params[key.strip()] = raw.strip()
        try:
            remaining, reset = int(params["r"]), float(params["t"])
        except (KeyError, ValueError):
            continue
        if remaining >= 0 and reset >= 0:
            buckets[match["name"]] = (remaining, reset)
    return buckets


@dataclass
class Headroom:
    """The buckets one provider last reported, each with when it resets (on `clock`)."""

    clock: Callable[[], float] = time.monotonic
    shared: dict[str, tuple[int, float]] = field(default_factory=dict)
    endpoints: dict[str, tuple[int, float]] = field(default_factory=dict)  # "GET /path"

    def note(self, method: str, path: str, header: str | None) -> None:
        """Keep what an answer to `method path` reported (nothing when it did not)."""
        if not header:
            return
        now = self.clock()
        for name, (remaining, reset) in parse_rate_limit(header).items():
            entry = (remaining, now + reset)
            if name == ENDPOINT:
                self.endpoints[f"{method} {path}"] = entry
            else:
                self.shared[name] = entry
        if len(self.endpoints) > 1000:  # paths with ids: forget the windows that are over
            self.endpoints = {k: v for k, v in self.endpoints.items() if v[1] > now}

    def reported(self, name: str) -> tuple[int, float] | None:
        """What was last reported of one bucket, shared ("project") or a path's ("GET /x"):
        (requests left, when its window resets), or None if it never was."""
        return self.shared.get(name) or self.endpoints.get(name)

    def wait_before(self, method: str, path: str, *, is_create: bool) -> float:
        """Seconds to hold `method path` back (0: send it now). Only paths the provider has
        reported on count, so a call it does not count (a token request) is never held."""
        endpoint = self.endpoints.get(f"{method} {path}")
        if is_create or endpoint is None:
            return 0.0
        now = self.clock()
        waits = [endpoint[1] - now] if endpoint[0] <= 0 else []
        waits += [resets - now for left, resets in self.shared.values() if left <= CREATE_RESERVE]
        return max([w for w in waits if w > 0], default=0.0)

    def remaining(self) -> dict[str, int]:
        """What is left of each shared bucket whose window is not over."""
        now = self.clock()
        return {name: left for name, (left, resets) in self.shared.items() if resets > now}
