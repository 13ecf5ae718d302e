"""The checks every provider gets, written once: credentials, stock, balance against the waiting
orders, which GPUs its configured images run (where an order may choose one), the rate-limit
headers it sends and its clock; and the provider's own (`spec.diagnose`).

Only reads are sent (and Verda's token request): no create, change or delete.
"""

import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from app.core.market import Fees, Offer, OrderWants, matches
from app.doctor.images import image_fit_verdict
from app.providers.diagnosis import Check, Probe, Status, Verdict
from app.providers.spec import ProviderSpec, Timeouts

CLOCK_SKEW_WARN = 5.0  # seconds between the provider's Date header and our clock
RATE_LIMIT_HEADERS = ("ratelimit", "x-ratelimit", "retry-after")


@dataclass
class ResponseLog:
    """What the provider's answers said in their headers: Date (against our clock) and limits."""

    skews: list[float] = field(default_factory=list)
    limits: dict[str, str] = field(default_factory=dict)

    async def __call__(self, response: httpx.Response) -> None:
        received = datetime.now(UTC)
        date = response.headers.get("date")
        if date:
            try:
                moment = parsedate_to_datetime(date)
            except (TypeError, ValueError):
                moment = None
            if moment is not None and moment.tzinfo is not None:
                self.skews.append((moment - received).total_seconds())
        for name, value in response.headers.items():
            if name.lower().startswith(RATE_LIMIT_HEADERS):
                self.limits[name] = value


async def check_provider(
    spec: ProviderSpec[Any],
    settings: Any,
    *,
    timeout: float,
    waiting: Sequence[OrderWants] | None,
    fees: Fees,
    verify: ssl.SSLContext | bool = True,
) -> list[Check]:
    """Every check of one provider, in order; a refused credential skips the rest."""
    log = ResponseLog()
    probe = Probe(spec.name, timeout)
    hooks: dict[str, list[Callable[..., Any]]] = {"response": [log]}
    async with httpx.AsyncClient(trust_env=False, event_hooks=hooks, verify=verify) as client:
        adapter = spec.build_adapter(settings, client, Timeouts(read=timeout, create=timeout))
        balance: list[Decimal] = []

        async def credentials() -> Verdict:
            balance.append(await adapter.balance())  # a read every provider authenticates
            return "accepted"

        await probe.run("credentials", credentials)
        if probe.refused:
            probe.checks.append(
                Check(spec.name, "other checks", Status.SKIP, "not run without credentials")
            )
            return probe.checks

        async def stock() -> Verdict:
            started = time.monotonic()
            probe.offers = await adapter.fetch_offers()
            elapsed = (time.monotonic() - started) * 1000
            return f"{len(probe.offers)} offers in stock, read in {elapsed:.0f} ms"

        await probe.run("stock", stock)
        if spec.diagnose is not None:
            await spec.diagnose(adapter, probe)
        if spec.chooses_image:

            async def image_fit() -> Verdict:
                return image_fit_verdict(await adapter.images())

            await probe.run("image fit", image_fit)

        async def funds() -> Verdict:
            if not balance:
                balance.append(await adapter.balance())
            return balance_verdict(balance[0], spec.name, probe.offers, waiting, fees)

        await probe.run("balance", funds)
    probe.checks.append(rate_limit_check(spec, log))
    probe.checks.append(clock_check(spec.name, log))
    return probe.checks


def balance_verdict(
    balance: Decimal,
    provider: str,
    offers: list[Offer] | None,
    waiting: Sequence[OrderWants] | None,
    fees: Fees,
) -> Verdict:
    """Whether `balance` pays one hour of the cheapest offer each waiting order could take."""
    shown = f"${balance:.2f}"
    orders = [o for o in waiting or () if provider in o.providers]
    if waiting is None or offers is None:
        why = "waiting orders unknown: database unread" if waiting is None else "stock unread"
        return Status.WARN if balance <= 0 else Status.PASS, f"{shown} ({why})"
    if not orders:
        return (Status.WARN if balance <= 0 else Status.PASS), f"{shown}; no waiting order here"
    needs = []
    for order in orders:
        prices = [
            o.price_per_hour for o in offers if matches(order, o, fees.apply(o.price_per_hour))
        ]
        if prices:
            needs.append(min(prices))
    if not needs:
        return f"{shown}; none of {len(orders)} waiting orders could take an offer in stock now"
    short = [need for need in needs if need > balance]
    if short:
        return Status.FAIL, (
            f"{shown} does not pay one hour for {len(short)} of {len(needs)} waiting orders "
            f"that could take an offer now (up to ${max(short):.2f})"
        )
    top = max(needs)
    return f"{shown} pays one hour for each of {len(needs)} waiting orders (up to ${top:.2f})"


def rate_limit_check(spec: ProviderSpec[Any], log: ResponseLog) -> Check:
    """The rate-limit headers the provider sent, beside the limits it publishes."""
    published = "; ".join(
        f"{limit.requests} per {limit.seconds:g} s {limit.scope}" for limit in spec.rate_limits
    )
    if log.limits:
        sent = ", ".join(f"{name}: {value}" for name, value in sorted(log.limits.items()))
        return Check(spec.name, "rate limits", Status.PASS, f"sent {sent}")
    return Check(spec.name, "rate limits", Status.PASS, f"no headers sent; published: {published}")


def clock_check(provider: str, log: ResponseLog) -> Check:
    """Our clock against the provider's `Date` headers (whole seconds: a second's slack)."""
    if not log.skews:
        return Check(provider, "clock", Status.WARN, "no Date header to compare with")
    skew = max(log.skews, key=abs)
    if abs(skew) > CLOCK_SKEW_WARN:
        where = "ahead of" if skew > 0 else "behind"
        return Check(
            provider,
            "clock",
            Status.WARN,
            f"the provider's clock is {abs(skew):.0f} s {where} ours (more than "
            f"{CLOCK_SKEW_WARN:g} s: check NTP)",
        )
    return Check(provider, "clock", Status.PASS, f"within {CLOCK_SKEW_WARN:g} s of ours")
