"""The checks of this side: the database (reachable, migrated), the secret key, the webhooks."""

from collections.abc import Sequence
from pathlib import Path

from sqlalchemy.engine import make_url

from app.core.market import OrderWants, all_wants_of
from app.providers.diagnosis import Check, Status
from app.providers.registry import abilities
from app.services import machine_reports, waiting_orders
from app.settings import Settings
from app.storage.db import create_engine, create_read_sessionmaker, ping, schema_revision
from app.support.secrets import SecretBox, SecretKeyError


def _check(name: str, status: Status, reason: str, scope: str = "database") -> Check:
    return Check(scope, name, status, reason)


async def check_database(settings: Settings) -> tuple[list[Check], list[OrderWants] | None]:
    """Reachable, at the newest migration, and its waiting orders (None if unread)."""
    url = make_url(settings.database_url)
    on_file = url.drivername.startswith("sqlite") and url.database not in (None, "", ":memory:")
    if on_file and not Path(str(url.database)).exists():
        # Connecting would create the file: look, do not touch.
        reason = f"no file at {url.database} yet: `autoprovision migrate` or a start makes it"
        return [_check("reachable", Status.WARN, reason)], None
    engine = create_engine(settings.database_url)
    try:
        try:
            await ping(create_read_sessionmaker(engine))
        except Exception as exc:
            cause = getattr(exc, "orig", None) or exc
            reason = f"unreachable: {type(cause).__name__}: {str(cause).splitlines()[0][:160]}"
            return [_check("reachable", Status.FAIL, reason)], None
        checks = [_check("reachable", Status.PASS, f"{engine.dialect.name} answers")]
        current, head, known = await schema_revision(engine)
        if current == head:
            checks.append(_check("migrations", Status.PASS, f"at head ({head})"))
        elif not known:
            checks.append(
                _check("migrations", Status.FAIL, f"at {current}, which this code does not know")
            )
            return checks, None
        else:
            reason = f"at {current or 'none'}, head is {head}: `autoprovision migrate` (or a start)"
            checks.append(_check("migrations", Status.WARN, reason))
            return checks, None
        async with create_read_sessionmaker(engine)() as session:
            able = abilities()
            rows = await waiting_orders.waiting(session)
            waiting = [w for row in rows for w in all_wants_of(row, able=able)]
        checks.append(_check("waiting orders", Status.PASS, f"{len(rows)}"))
        return checks, waiting
    finally:
        await engine.dispose()


def check_secret_key(settings: Settings) -> Check:
    """The Fernet keys for webhook secrets at rest: valid, or where one would come from."""
    if settings.secret_key is not None:
        keys = [k.strip() for k in settings.secret_key.get_secret_value().split(",") if k.strip()]
        source = "AUTOPROVISION_SECRET_KEY"
    elif settings.secret_key_file.exists():
        keys = [settings.secret_key_file.read_text().strip()]
        source = str(settings.secret_key_file)
    else:
        return _check(
            "secret key",
            Status.WARN,
            f"none set: one will be generated into {settings.secret_key_file} at first use "
            "(replicas must share it: set AUTOPROVISION_SECRET_KEY)",
            "settings",
        )
    try:
        SecretBox(keys)
    except SecretKeyError as exc:
        return _check("secret key", Status.FAIL, f"{source}: {exc}", "settings")
    count = f"{len(keys)} keys, the first encrypts" if len(keys) > 1 else "1 key"
    return _check("secret key", Status.PASS, f"{source}: valid Fernet ({count})", "settings")


def check_webhooks(settings: Settings) -> Check:
    """Whether the webhook settings make sense for the mode."""
    schedule: Sequence[float] = settings.webhook_retry_schedule
    summary = (
        f"timeout {settings.webhook_timeout_seconds:g} s, {len(schedule)} attempts over "
        f"{sum(schedule) / 3600:.1f} h, an endpoint disabled after "
        f"{settings.webhook_disable_after_hours:g} h of failures"
    )
    if settings.mode == "live" and settings.allows_private_webhooks:
        return _check(
            "webhooks",
            Status.WARN,
            f"{summary}; private and loopback receivers allowed in live mode "
            "(AUTOPROVISION_WEBHOOK_ALLOW_PRIVATE)",
            "settings",
        )
    return _check("webhooks", Status.PASS, summary, "settings")


def check_reports(settings: Settings) -> Check:
    """Whether machines can reach this service to report how far their start-up script got."""
    url = machine_reports.report_url_for(settings)
    if url is not None:
        return _check("machine reports", Status.PASS, f"machines report to {url}", "settings")
    return _check(
        "machine reports",
        Status.WARN,
        "AUTOPROVISION_PUBLIC_URL is unset: machines cannot report how far their start-up "
        "script got, so no order shows its machine's stage or when its model is ready",
        "settings",
    )
