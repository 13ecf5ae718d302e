"""A machine's reports of itself: the token its script gets, where it reports, and what a report
changes on its attempt (on both databases, the clock given by the test)."""

from datetime import timedelta
from decimal import Decimal

import pytest
from pydantic import AnyHttpUrl
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Provider
from app.core.clock import utcnow
from app.core.errors import Conflict, TooManyRequests, Unauthorized
from app.core.market import Offer
from app.core.states import AttemptStatus, MachineFailure, MachineStage
from app.services import machine_reports
from app.services.machine_reports import MachineReport, digest, record, with_report_channel
from app.settings import Settings
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Attempt, OrderEvent
from tests.factories import claim, waiting_orders

VERDA_H100 = Offer(Provider("verda"), "FIN-01", "1H100.80S.22V", "H100", 1, Decimal("2.19"))
URL = "https://gpus.example.com/v1/machines/report"
SCRIPT = "#!/bin/bash\necho hello\n"
GB = 10**9


class TestTheScript:
    @pytest.mark.parametrize("shebang", ["#!/bin/bash", "#!/usr/bin/env bash", "#!/bin/sh -e"])
    def test_a_shell_script_exports_where_and_how_to_report_right_after_its_first_line(
        self, shebang: str
    ) -> None:
        reporting = with_report_channel(f"{shebang}\necho hello\n", URL, "apm_abc")
        assert reporting == (
            f"{shebang}\n"
            f"export AUTOPROVISION_REPORT_URL={URL}\n"
            "export AUTOPROVISION_REPORT_TOKEN=apm_abc\n"
            "echo hello\n"
        )

    @pytest.mark.parametrize(
        "script",
        ["#cloud-config\nruncmd: [ls]\n", "#!/usr/bin/env python3\nprint(1)\n", "echo no shebang"],
    )
    def test_anything_else_is_left_as_it_is(self, script: str) -> None:
        assert with_report_channel(script, URL, "apm_abc") is None
        assert with_report_channel("#!/bin/bash", URL, "apm_abc") is not None  # control

    def test_a_url_that_needs_quoting_is_quoted(self) -> None:
        reporting = with_report_channel(SCRIPT, "https://h/x y?a=1&b=2", "apm_abc")
        assert reporting is not None
        assert "export AUTOPROVISION_REPORT_URL='https://h/x y?a=1&b=2'\n" in reporting


def test_machines_report_to_the_public_url_or_in_demo_mode_to_this_service() -> None:
    assert machine_reports.report_url("https://gpus.example.com/", demo=False, port=8000) == URL
    assert machine_reports.report_url(None, demo=True, port=8123) == (
        "http://127.0.0.1:8123/v1/machines/report"
    )
    assert machine_reports.report_url(None, demo=False, port=8000) is None
    live = Settings(_env_file=None, mode="live")
    assert machine_reports.report_url_for(live) is None
    public = live.model_copy(update={"public_url": AnyHttpUrl("https://gpus.example.com")})
    assert machine_reports.report_url_for(public) == URL


def test_a_token_is_new_each_time_and_only_its_digest_is_kept() -> None:
    (one, kept), (two, _) = machine_reports.new_token(), machine_reports.new_token()
    assert one != two and one.startswith("apm_") and len(one) > 40
    assert kept == digest(one) and len(kept) == 64 and one not in kept


async def _attempt_with_token(engine: AsyncEngine) -> tuple[str, str]:
    """An order with a start-up script claimed for Verda's H100: its attempt id and token."""
    (order_id,) = await waiting_orders(engine, VERDA_H100, startup_script=SCRIPT)
    intent = await claim(engine, order_id, VERDA_H100)
    assert intent.report_token is not None
    assert intent.report_token not in repr(intent)  # never in a log line that shows the intent
    return intent.attempt_id, intent.report_token


async def _record(engine: AsyncEngine, token: str, report: MachineReport, at: float) -> None:
    async with session_scope(create_sessionmaker(engine)) as session:
        await record(session, token=token, report=report, now=T0 + timedelta(seconds=at))


async def _attempt(engine: AsyncEngine, attempt_id: str) -> Attempt:
    async with session_scope(create_sessionmaker(engine)) as session:
        found = await session.get(Attempt, attempt_id)
        assert found is not None
        return found


T0 = utcnow()


async def test_an_order_without_a_script_gets_no_token(engine: AsyncEngine) -> None:
    (order_id,) = await waiting_orders(engine, VERDA_H100)
    assert (await claim(engine, order_id, VERDA_H100)).report_token is None
    (scripted,) = await waiting_orders(engine, VERDA_H100, startup_script=SCRIPT)
    assert (await claim(engine, scripted, VERDA_H100)).report_token is not None  # control


async def test_stages_move_the_attempt_and_a_download_shows_its_rate_and_time_left(
    engine: AsyncEngine,
) -> None:
    attempt_id, token = await _attempt_with_token(engine)
    await _record(engine, token, MachineReport(MachineStage.BOOTED), at=0)
    downloading = MachineStage.DOWNLOADING
    await _record(engine, token, MachineReport(downloading, bytes_done=0, bytes_total=100 * GB), 5)
    await _record(
        engine, token, MachineReport(downloading, bytes_done=20 * GB, bytes_total=100 * GB), 15
    )
    attempt = await _attempt(engine, attempt_id)
    assert attempt.stage == "downloading"
    assert attempt.progress == {
        "bytes_done": 20 * GB,
        "bytes_total": 100 * GB,
        "rate": 2.0 * GB,  # 20 GB in 10 s
        "eta_seconds": 40,  # 80 GB left
    }
    answered = MachineReport(
        MachineStage.READY, detail="first token", time_to_first_token_seconds=0.42
    )
    await _record(engine, token, answered, 60)
    ready = await _attempt(engine, attempt_id)
    assert (ready.stage, ready.progress, ready.ready_at, ready.time_to_first_token_seconds) == (
        "ready",
        None,
        T0 + timedelta(seconds=60),
        0.42,
    )
    async with session_scope(create_sessionmaker(engine)) as session:
        lines = [
            (e.kind, e.message)
            for e in (
                await session.execute(OrderEvent.__table__.select().order_by(OrderEvent.id))
            ).all()
            if e.kind.startswith("machine_")
        ]
    # One line per stage, not per progress report; `ready` a kind of its own (`order.ready`).
    assert lines == [
        ("machine_report", "The machine reports: booted."),
        ("machine_report", "The machine reports: downloading."),
        ("machine_ready", "The machine reports: ready ('first token')."),
    ]


async def test_a_stage_reported_again_within_a_second_is_refused_a_new_one_is_not(
    engine: AsyncEngine,
) -> None:
    _, token = await _attempt_with_token(engine)
    await _record(engine, token, MachineReport(MachineStage.DOWNLOADING, bytes_done=1), at=0)
    with pytest.raises(TooManyRequests) as refused:
        await _record(engine, token, MachineReport(MachineStage.DOWNLOADING, bytes_done=2), 0.5)
    assert (refused.value.code, refused.value.retry_after) == ("too_many_reports", 1)
    await _record(engine, token, MachineReport(MachineStage.DOWNLOADING, bytes_done=3), 1.0)
    await _record(engine, token, MachineReport(MachineStage.HEALTHY), 1.1)  # a new stage: taken


async def test_a_failure_says_its_cause(engine: AsyncEngine) -> None:
    attempt_id, token = await _attempt_with_token(engine)
    failed = MachineReport(
        MachineStage.FAILED, detail="driver 535 < 570", cause=MachineFailure.DRIVER_TOO_OLD
    )
    await _record(engine, token, failed, at=0)
    attempt = await _attempt(engine, attempt_id)
    assert (attempt.stage, attempt.stage_detail) == ("failed", "driver_too_old: driver 535 < 570")


async def test_a_token_is_refused_once_its_attempt_is_being_deleted_or_unknown(
    engine: AsyncEngine,
) -> None:
    attempt_id, token = await _attempt_with_token(engine)
    await _record(engine, token, MachineReport(MachineStage.BOOTED), at=0)  # control: taken
    async with session_scope(create_sessionmaker(engine)) as session:
        await session.execute(
            update(Attempt).where(Attempt.id == attempt_id).values(status=AttemptStatus.TERMINATING)
        )
    with pytest.raises(Conflict) as ended:
        await _record(engine, token, MachineReport(MachineStage.READY), at=5)
    assert ended.value.code == "attempt_ended"
    with pytest.raises(Unauthorized) as unknown:
        await _record(engine, "apm_" + "x" * 43, MachineReport(MachineStage.READY), at=6)
    assert unknown.value.code == "invalid_report_token"
    assert (await _attempt(engine, attempt_id)).stage == "booted"  # neither changed it


async def test_a_stage_moves_forward_only_so_a_machine_makes_one_event_a_stage(
    engine: AsyncEngine,
) -> None:
    attempt_id, token = await _attempt_with_token(engine)
    await _record(engine, token, MachineReport(MachineStage.HEALTHY), at=0)
    with pytest.raises(Conflict) as behind:
        await _record(engine, token, MachineReport(MachineStage.BOOTED), at=5)
    assert behind.value.code == "stage_behind"
    await _record(engine, token, MachineReport(MachineStage.READY), at=6)  # control: forward
    await _record(engine, token, MachineReport(MachineStage.FAILED), at=7)  # failed comes last
    with pytest.raises(Conflict):
        await _record(engine, token, MachineReport(MachineStage.READY), at=8)
    assert (await _attempt(engine, attempt_id)).stage == "failed"
