"""`autoprovision doctor`: a read-only check of everything a live deploy needs, one line each.

It reads from each configured provider (credentials, stock, prices, balance, the image and
what a create would use, rate-limit headers, clock), the database and the settings, and never
creates, changes or deletes anything at a provider.
"""

import asyncio
import json
from dataclasses import asdict

from app.core.market import Fees
from app.demo.mode import EmbeddedSimulators
from app.doctor.local import check_database, check_reports, check_secret_key, check_webhooks
from app.doctor.providers import check_provider
from app.providers.diagnosis import Check, Status
from app.providers.http import provider_tls
from app.providers.registry import credentials_hint, offered, simulated
from app.settings import Settings

__all__ = ["Check", "Status", "check_demo", "passed", "render_json", "render_text", "run"]

MARKS = {Status.PASS: "ok", Status.WARN: "WARN", Status.FAIL: "FAIL", Status.SKIP: "skip"}


async def run(settings: Settings, *, timeout: float) -> list[Check]:
    """Every check, providers first (each call given `timeout` seconds), then this side."""
    database, waiting = await check_database(settings)
    fees = Fees(settings.fee_percent, settings.fee_flat_per_hour)
    specs = [s for s in offered() if s.settings_of(settings).has_credentials()]
    found = await asyncio.gather(
        *(
            check_provider(
                spec,
                spec.settings_of(settings),
                timeout=timeout,
                waiting=waiting,
                fees=fees,
                verify=provider_tls(settings.provider_ca_file),
            )
            for spec in specs
        )
    )
    checks = [check for provider_checks in found for check in provider_checks]
    if not specs:
        reason = f"no provider has credentials: set {credentials_hint()}"
        checks.append(Check("providers", "configured", Status.FAIL, reason))
    return [
        *checks,
        *database,
        check_secret_key(settings),
        check_webhooks(settings),
        check_reports(settings),
    ]


async def check_demo(settings: Settings, *, sim_url: str | None, timeout: float) -> list[Check]:
    """`run` with the providers at the simulators, as demo mode has them: at `sim_url`, else
    served from this process on the demo port (or whatever serves there already)."""
    settings = settings.model_copy(update={"mode": "demo"})
    simulators = None
    if sim_url is None:
        sim_url = settings.sim_url
        if settings.sim_embedded:
            simulators = EmbeddedSimulators(settings.sim_port)
            try:
                await simulators.start()
            except RuntimeError:  # the port is taken: a running demo's simulators, most likely
                simulators = None
    try:
        return await run(simulated(settings, sim_url), timeout=timeout)
    finally:
        if simulators is not None:
            await simulators.stop()


def passed(checks: list[Check]) -> bool:
    """Whether no check failed (warnings pass)."""
    return all(check.status is not Status.FAIL for check in checks)


def render_text(checks: list[Check]) -> str:
    """One line per check: its mark, where, what, and why."""
    scope_width = max((len(c.scope) for c in checks), default=0)
    name_width = max((len(c.name) for c in checks), default=0)
    lines = [
        f"  {MARKS[c.status]:<4}  {c.scope:<{scope_width}}  {c.name:<{name_width}}  {c.reason}"
        for c in checks
    ]
    failed = sum(c.status is Status.FAIL for c in checks)
    warned = sum(c.status is Status.WARN for c in checks)
    if failed:
        lines.append(f"\n{failed} failed, {warned} warnings: not ready for a live deploy")
    else:
        lines.append(f"\nready ({warned} warnings)" if warned else "\nready: every check passed")
    return "\n".join(lines) + "\n"


def render_json(checks: list[Check]) -> str:
    """`{"ok": ..., "checks": [{scope, name, status, reason}]}` for scripts."""
    return json.dumps({"ok": passed(checks), "checks": [asdict(c) for c in checks]}, indent=2)
