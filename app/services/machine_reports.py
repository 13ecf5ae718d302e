"""What a machine says of itself: its start-up script reports each stage it reaches (booted,
downloading, the engine healthy, ready, or failed) to `POST /v1/machines/report`, with a token
made for its create attempt alone.

The token goes into the script the create sends and nowhere else: the attempt keeps only its
SHA-256, so a report finds its attempt by it and a database read yields no token.
"""

import hashlib
import secrets
import shlex
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Conflict, TooManyRequests, Unauthorized
from app.core.states import (
    AttemptStatus,
    MachineFailure,
    MachineStage,
    OrderEventKind,
    WebhookEventType,
)
from app.core.text import quote
from app.services import timeline
from app.services.timeline import Line
from app.services.webhooks import outbox
from app.settings import Settings
from app.storage.models import Attempt

REPORT_PATH = "/v1/machines/report"
TOKEN_PREFIX = "apm_"  # tells a machine's token from an account's API key at a glance
# Reports of one stage come at most this often (a download's progress); a new stage is always
# taken, so `ready` is never held back behind a progress report.
MIN_SECONDS_BETWEEN_REPORTS = 1.0
# The attempts whose machine may still report: being made, or made and not being deleted.
REPORTING = frozenset(
    {AttemptStatus.CREATING, AttemptStatus.UNKNOWN, AttemptStatus.DEPLOYED, AttemptStatus.RUNNING}
)
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})
# A new stage's timeline kind and webhook: `order.ready`, `order.not_ready`, else
# `order.progress` (once a stage, not once a report: a download's bytes make no event).
STAGE_EVENTS: dict[MachineStage | None, tuple[OrderEventKind, WebhookEventType]] = {
    MachineStage.READY: (OrderEventKind.MACHINE_READY, WebhookEventType.ORDER_READY),
    MachineStage.FAILED: (OrderEventKind.MACHINE_FAILED, WebhookEventType.ORDER_NOT_READY),
    None: (OrderEventKind.MACHINE_REPORT, WebhookEventType.ORDER_PROGRESS),
}
DETAIL_ON_TIMELINE = 150  # characters of what the machine said


def new_token() -> tuple[str, str]:
    """A new report token and the SHA-256 (hex) the attempt keeps of it."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return token, digest(token)


def digest(token: str) -> str:
    """The SHA-256 of a token, in hex: what an attempt keeps and a report is looked up by."""
    return hashlib.sha256(token.encode()).hexdigest()


def report_url(public_url: str | None, *, demo: bool, port: int) -> str | None:
    """Where machines send reports: the service's public URL, or in demo mode (where the
    simulated machines run here) its own loopback address; None when machines cannot reach it."""
    if public_url is not None:
        return public_url.rstrip("/") + REPORT_PATH
    if demo:
        return f"http://127.0.0.1:{port}{REPORT_PATH}"
    return None


def report_url_for(settings: Settings) -> str | None:
    """`report_url` of this service's settings."""
    public = None if settings.public_url is None else str(settings.public_url)
    return report_url(public, demo=settings.mode == "demo", port=settings.port)


def unreported_line(order_id: str) -> Line:
    """The note an order that serves a model gets when its machine cannot report to us."""
    return Line(
        order_id,
        OrderEventKind.NO_REPORTS,
        "Machines cannot reach this service (AUTOPROVISION_PUBLIC_URL is not set), so this order "
        "will not show when its model is ready: follow it on the machine "
        "(docker logs -f autoprovision-<engine>).",
    )


def with_report_channel(script: str, url: str, token: str) -> str | None:
    """`script` with `AUTOPROVISION_REPORT_URL` and `AUTOPROVISION_REPORT_TOKEN` exported right
    after its `#!` line; None when it is not a shell script (cloud-config, Python...), where
    export lines would break it."""
    first, newline, rest = script.partition("\n")
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    interpreter = words[1] if words and words[0].endswith("/env") and len(words) > 1 else None
    if interpreter is None and words:
        interpreter = words[0].rsplit("/", 1)[-1]
    if interpreter not in SHELLS:
        return None
    exports = (
        f"export AUTOPROVISION_REPORT_URL={shlex.quote(url)}\n"
        f"export AUTOPROVISION_REPORT_TOKEN={shlex.quote(token)}\n"
    )
    return f"{first}\n{exports}{rest if newline else ''}"


@dataclass(frozen=True)
class MachineReport:
    """One report, as the API took it: a stage, what the machine says, its download's bytes so
    far and in all (while downloading), for `failed` why, and for `ready` how long the first
    completion took."""

    stage: MachineStage
    detail: str | None = None
    bytes_done: int | None = None
    bytes_total: int | None = None
    cause: MachineFailure | None = None
    time_to_first_token_seconds: float | None = None  # with `ready`


@dataclass(frozen=True)
class Recorded:
    """What a report changed: its order and attempt, and whether the stage is new."""

    order_id: str
    attempt_id: str
    stage: MachineStage
    new_stage: bool


async def record(
    session: AsyncSession, *, token: str, report: MachineReport, now: datetime
) -> Recorded:
    """Record `report` on the attempt whose token it carries (in the caller's transaction).

    Raises Unauthorized for a token no attempt has, Conflict once the attempt no longer takes
    reports (its machine is being deleted or gone) or for a stage behind the one reported (so a
    machine makes at most one event a stage), and TooManyRequests for a report of the same stage
    within MIN_SECONDS_BETWEEN_REPORTS of the last."""
    attempt = (
        await session.execute(
            select(Attempt).where(Attempt.report_token_sha256 == digest(token)).with_for_update()
        )
    ).scalar_one_or_none()
    if attempt is None:
        raise Unauthorized("not a machine's report token", code="invalid_report_token")
    if attempt.status not in REPORTING:
        raise Conflict(
            "this machine's attempt has ended: it takes no more reports", code="attempt_ended"
        )
    same_stage = attempt.stage == report.stage
    if attempt.stage is not None and _rank(report.stage) < _rank(MachineStage(attempt.stage)):
        raise Conflict(
            f"this machine reported {attempt.stage} already: a stage only moves forward",
            code="stage_behind",
        )
    if (
        same_stage
        and attempt.reported_at is not None
        and (now - attempt.reported_at).total_seconds() < MIN_SECONDS_BETWEEN_REPORTS
    ):
        raise TooManyRequests(
            f"one report of a stage a second at most: {report.stage} was reported just now",
            code="too_many_reports",
            retry_after=1,
        )
    progress = _progress(attempt, report, now)
    attempt.stage = report.stage
    attempt.stage_detail = _detail(report)
    attempt.progress = progress
    if report.stage is MachineStage.READY and attempt.ready_at is None:
        attempt.ready_at = now
        attempt.time_to_first_token_seconds = report.time_to_first_token_seconds
    attempt.reported_at = now
    if not same_stage:
        kind, event = STAGE_EVENTS.get(report.stage, STAGE_EVENTS[None])
        await timeline.write(session, Line(attempt.order_id, kind, _line(report)))
        await outbox.emit(session, order_id=attempt.order_id, event_type=event)
    return Recorded(attempt.order_id, attempt.id, report.stage, new_stage=not same_stage)


def _rank(stage: MachineStage) -> int:
    """Where `stage` comes in a machine's way (`failed` last)."""
    return list(MachineStage).index(stage)


def _detail(report: MachineReport) -> str | None:
    if report.cause is None:
        return report.detail
    return f"{report.cause}: {report.detail}" if report.detail else str(report.cause)


def _progress(attempt: Attempt, report: MachineReport, now: datetime) -> dict[str, Any] | None:
    """Bytes done and in all; with a report of the same stage before, the rate between the two
    (bytes a second) and the seconds left at that rate."""
    if report.bytes_done is None and report.bytes_total is None:
        return None
    progress: dict[str, Any] = {
        "bytes_done": report.bytes_done,
        "bytes_total": report.bytes_total,
        "rate": None,
        "eta_seconds": None,
    }
    before = attempt.progress or {}
    done_before = before.get("bytes_done")
    if (
        attempt.stage == report.stage
        and attempt.reported_at is not None
        and isinstance(done_before, int)
        and report.bytes_done is not None
        and report.bytes_done >= done_before
    ):
        seconds = (now - attempt.reported_at).total_seconds()
        rate = (report.bytes_done - done_before) / seconds if seconds > 0 else 0.0
        progress["rate"] = round(rate, 1)
        if rate > 0 and report.bytes_total is not None:
            progress["eta_seconds"] = round(max(report.bytes_total - report.bytes_done, 0) / rate)
    return progress


def _line(report: MachineReport) -> str:
    said = f" ({quote(report.detail, DETAIL_ON_TIMELINE)})" if report.detail else ""
    if report.stage is MachineStage.FAILED:
        return f"The machine reports it failed: {report.cause or MachineFailure.OTHER}{said}."
    return f"The machine reports: {report.stage}{said}."
