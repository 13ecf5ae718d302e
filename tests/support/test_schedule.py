"""The one scheduler: jobs run on their period, a slow run is never doubled, a failing job runs
again, and a group removed (the watcher losing its lease) stops at once, its runs cancelled."""

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from app.support.schedule import PacedJob, PeriodicJob, Schedule

SHORT = 0.01  # seconds: a period that fires many times while a test waits on a condition


@pytest.fixture
async def schedule() -> AsyncIterator[Schedule]:
    schedule = Schedule()
    schedule.start()
    yield schedule
    await schedule.shutdown()


class Counting:
    """A job that counts its runs and sets `reached` at the `goal`th."""

    def __init__(self, goal: int = 3) -> None:
        self.runs = 0
        self.goal = goal
        self.reached = asyncio.Event()

    async def __call__(self) -> None:
        self.runs += 1
        if self.runs >= self.goal:
            self.reached.set()


async def test_a_job_runs_at_once_and_then_on_its_period(schedule: Schedule) -> None:
    job = Counting(goal=3)
    schedule.add("g", [PeriodicJob("count", SHORT, job)])
    await asyncio.wait_for(job.reached.wait(), 10)
    assert schedule.job_ids() == ["g:count"]


async def test_a_job_not_at_once_waits_for_its_first_period(schedule: Schedule) -> None:
    later, soon = Counting(goal=1), Counting(goal=1)
    schedule.add("g", [PeriodicJob("later", 3600, later, at_once=False)])
    schedule.add("h", [PeriodicJob("soon", 3600, soon)])
    await asyncio.wait_for(soon.reached.wait(), 10)  # the control: an at-once job has run
    assert later.runs == 0
    first = schedule.scheduler.get_job("g:later").next_run_time
    assert first - datetime.now(UTC) > timedelta(minutes=59)  # a period from now, not at once


async def test_a_run_still_going_is_not_doubled(schedule: Schedule) -> None:
    started = asyncio.Event()
    release = asyncio.Event()
    running = most = 0

    async def slow() -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        started.set()
        await release.wait()
        running -= 1

    ticks = Counting(goal=20)  # on the same period: turns that came while `slow` ran
    schedule.add("g", [PeriodicJob("slow", SHORT, slow), PeriodicJob("ticks", SHORT, ticks)])
    await asyncio.wait_for(started.wait(), 10)
    await asyncio.wait_for(ticks.reached.wait(), 10)
    assert most == 1
    assert len(schedule.running("g")) == 1
    release.set()


async def test_a_failing_job_is_run_again(
    schedule: Schedule, caplog: pytest.LogCaptureFixture
) -> None:
    calls = Counting(goal=3)

    async def failing() -> None:
        await calls()
        raise RuntimeError("provider said no")

    schedule.add("g", [PeriodicJob("failing", SHORT, failing)])
    await asyncio.wait_for(calls.reached.wait(), 10)
    assert "periodic job 'failing' failed" in caplog.text


async def test_removing_a_group_cancels_its_run_and_stops_it_others_go_on(
    schedule: Schedule,
) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()
    runs = 0

    async def held() -> None:
        nonlocal runs
        runs += 1
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    other = Counting()
    schedule.add("watcher", [PeriodicJob("held", SHORT, held)])
    schedule.add("replica", [PeriodicJob("other", SHORT, other)])
    await asyncio.wait_for(started.wait(), 10)
    await schedule.remove("watcher")
    assert cancelled.is_set()
    assert schedule.running("watcher") == []
    assert schedule.job_ids() == ["replica:other"]
    runs_when_removed = runs
    other.goal, other.runs = 5, 0
    other.reached.clear()
    await asyncio.wait_for(other.reached.wait(), 10)  # the control: the scheduler still fires
    assert runs == runs_when_removed


async def test_shutdown_cancels_every_run() -> None:
    schedule = Schedule()
    schedule.start()
    started = asyncio.Event()

    async def held() -> None:
        started.set()
        await asyncio.Event().wait()

    schedule.add("g", [PeriodicJob("held", SHORT, held)])
    await asyncio.wait_for(started.wait(), 10)
    (run,) = schedule.running("g")
    await schedule.shutdown()
    assert run.cancelled()
    assert not schedule.scheduler.running


async def test_runs_are_not_logged_a_failure_is(
    schedule: Schedule, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    quiet, loud = Counting(goal=5), Counting(goal=1)

    async def failing() -> None:
        await loud()
        raise RuntimeError("provider said no")

    schedule.add("g", [PeriodicJob("quiet", SHORT, quiet), PeriodicJob("loud", 3600, failing)])
    await asyncio.wait_for(quiet.reached.wait(), 10)
    await asyncio.wait_for(loud.reached.wait(), 10)
    assert not [r for r in caplog.records if r.name.startswith("apscheduler")]
    assert [r.getMessage() for r in caplog.records] == ["periodic job 'loud' failed"]


class TestPacedJob:
    async def test_it_runs_at_once_then_when_its_last_run_said(self, schedule: Schedule) -> None:
        ran_at: list[float] = []
        third = asyncio.Event()

        async def paced() -> float:
            ran_at.append(time.monotonic())
            if len(ran_at) == 3:
                third.set()
            return 0.3 if len(ran_at) == 1 else SHORT

        schedule.add("g", [PacedJob("paced", paced)])
        await asyncio.wait_for(third.wait(), 10)
        assert ran_at[1] - ran_at[0] >= 0.3  # the wait the first run asked for

    async def test_removed_it_runs_no_more_while_others_go_on(self, schedule: Schedule) -> None:
        paced, control = Counting(goal=3), Counting(goal=5)

        async def run() -> float:
            await paced()
            return SHORT

        schedule.add("g", [PacedJob("paced", run)])
        await asyncio.wait_for(paced.reached.wait(), 10)
        await schedule.remove("g")
        runs = paced.runs
        schedule.add("h", [PeriodicJob("control", SHORT, control)])
        await asyncio.wait_for(control.reached.wait(), 10)  # the control: time went by
        assert paced.runs == runs
        assert schedule.job_ids() == ["h:control"]

    async def test_a_failed_run_is_tried_again(
        self, schedule: Schedule, caplog: pytest.LogCaptureFixture
    ) -> None:
        again = Counting(goal=2)

        async def failing_once() -> float:
            await again()
            if again.runs == 1:
                raise RuntimeError("provider said no")
            return 3600

        schedule.add("g", [PacedJob("flaky", failing_once)])
        await asyncio.wait_for(again.reached.wait(), 10)
        assert [r.getMessage() for r in caplog.records] == ["paced job 'flaky' failed"]
