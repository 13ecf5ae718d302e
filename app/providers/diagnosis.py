"""What a read-only check reports (`autoprovision doctor`): one `Check` per thing a live deploy
needs, and `Probe`, which runs one provider read and turns its outcome into a `Check`.

Provider packages add their own checks (a `diagnose` on their spec) with these; nothing here
sends a request by itself.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum

import httpx

from app.core.market import Offer
from app.providers.base import AuthFailed, ProviderAdapter, ProviderError, RateLimited


class Status(StrEnum):
    """How a check came out; only `fail` makes the whole check fail."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class Check:
    """One line of the report: what was checked (`scope`, `name`), how it came out, and why."""

    scope: str  # a provider's name, or "database", "settings"
    name: str
    status: Status
    reason: str


# What a read returns: a reason (it passed), or a status and a reason.
Verdict = str | tuple[Status, str]


def failure_reason(exc: ProviderError, timeout: float) -> str:
    """A provider failure in a few words; decided on its type, status and cause, not its text."""
    if isinstance(exc, AuthFailed):
        return "credentials refused"
    if isinstance(exc, RateLimited):
        wait = "" if exc.retry_after is None else f" (retry after {exc.retry_after:g} s)"
        return f"rate limited{wait}"
    if isinstance(exc.__cause__, httpx.TimeoutException):
        return f"no answer in {timeout:g} s"
    if isinstance(exc.__cause__, httpx.TransportError):
        return f"cannot connect ({type(exc.__cause__).__name__})"
    if exc.status_code is not None and exc.status_code >= 500:
        return f"provider error {exc.status_code}"
    return exc.message


@dataclass
class Probe:
    """Runs a provider's reads for the doctor: each one becomes a `Check` in `scope`."""

    scope: str
    timeout: float  # seconds per call, as the clients were built with
    offers: list[Offer] | None = None  # what the stock read found, once it ran
    checks: list[Check] = field(default_factory=list)
    refused: bool = False  # some read's credentials were refused

    async def run(self, name: str, read: Callable[[], Awaitable[Verdict]]) -> Check:
        """Run `read`; its verdict, or the provider failure it raised, becomes a `Check`."""
        try:
            verdict = await read()
        except ProviderError as exc:
            self.refused = self.refused or isinstance(exc, AuthFailed)
            check = Check(self.scope, name, Status.FAIL, failure_reason(exc, self.timeout))
        else:
            status, reason = (Status.PASS, verdict) if isinstance(verdict, str) else verdict
            check = Check(self.scope, name, status, reason)
        self.checks.append(check)
        return check


# A provider's own checks (its image, its environments...), given its adapter.
Diagnose = Callable[[ProviderAdapter, Probe], Awaitable[None]]
