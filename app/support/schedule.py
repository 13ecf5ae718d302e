"""One scheduler for a process's periodic jobs: APScheduler's asyncio scheduler.

A job runs on a period (`PeriodicJob`) or paces itself, each run saying when the next is due
(`PacedJob`). Jobs come in groups. The replica's housekeeping is added at start-up; the
watcher's jobs are added when this replica takes the watcher lease and removed, their runs in
progress cancelled, when it loses it. A run still going when the next is due is not doubled:
that turn is skipped."""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from apscheduler.schedulers.asyncio import AsyncIOScheduler

log = logging.getLogger(__name__)
# APScheduler says at INFO each run it starts and ends: with jobs every half second, most of a
# service's log. Its warnings and errors still show; a job's own failure is logged by `_run`.
for _chatty in ("apscheduler.scheduler", "apscheduler.executors"):
    logging.getLogger(_chatty).setLevel(logging.WARNING)


@dataclass(frozen=True)
class PeriodicJob:
    """A coroutine run every `seconds`; the first run at once when `at_once`."""

    name: str
    seconds: float
    run: Callable[[], Awaitable[object]]
    at_once: bool = True


@dataclass(frozen=True)
class PacedJob:
    """A coroutine run at once, then again as many seconds after each run as it returned (a
    provider's stock reads, paced by its budget); a second after a run that failed."""

    name: str
    run: Callable[[], Awaitable[float]]


RETRY_FAILED_PACED_SECONDS = 1.0


class Schedule:
    """The process's scheduler, with the runs of each group's jobs tracked so a group can be
    stopped whole."""

    def __init__(self) -> None:
        self.scheduler = AsyncIOScheduler(timezone="UTC")
        self._runs: dict[str, asyncio.Task[None]] = {}  # by job id: its run in progress
        self._paced: dict[str, PacedJob] = {}  # by job id: each scheduled anew after its run

    def start(self) -> None:
        """Start firing jobs (inside the running event loop)."""
        self.scheduler.start()

    async def shutdown(self) -> None:
        """Stop firing, and cancel every run in progress."""
        for group in {job_id.split(":", 1)[0] for job_id in [*self.job_ids(), *self._paced]}:
            await self.remove(group)
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
            await asyncio.sleep(0)  # APScheduler stops on the loop's next turn: let it

    def add(self, group: str, jobs: Iterable[PeriodicJob | PacedJob]) -> None:
        """Run each of `jobs` every its period (or as it paces itself), under `group`."""
        for job in jobs:
            job_id = f"{group}:{job.name}"
            if isinstance(job, PacedJob):
                self._paced[job_id] = job
                self._run_paced_in(job_id, 0.0)
                continue
            # Left out, the first run comes one period after this (given as None, never).
            first = {"next_run_time": datetime.now(UTC)} if job.at_once else {}
            self.scheduler.add_job(
                self._start_run,
                "interval",
                seconds=job.seconds,
                args=[job_id, job],
                id=job_id,
                name=job_id,
                # The run itself is a task of ours (see _start_run): APScheduler's own instance
                # lasts a moment, and a late turn still runs, once.
                max_instances=1,
                coalesce=True,
                misfire_grace_time=None,
                replace_existing=True,
                **first,
            )

    async def remove(self, group: str) -> None:
        """Stop `group`'s jobs: no new runs, and the runs in progress cancelled and awaited."""
        prefix = f"{group}:"
        for job_id in [i for i in self._paced if i.startswith(prefix)]:
            del self._paced[job_id]
        for job_id in self.job_ids():
            if job_id.startswith(prefix):
                self.scheduler.remove_job(job_id)
        runs = [self._runs.pop(i) for i in list(self._runs) if i.startswith(prefix)]
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)

    def job_ids(self) -> list[str]:
        """Every job scheduled, as `group:name`."""
        return [job.id for job in self.scheduler.get_jobs()]

    def running(self, group: str) -> list[asyncio.Task[None]]:
        """The runs of `group`'s jobs in progress now."""
        return [t for i, t in self._runs.items() if i.startswith(f"{group}:") and not t.done()]

    def _run_paced_in(self, job_id: str, seconds: float) -> None:
        run_at = datetime.now(UTC) + timedelta(seconds=seconds)
        self.scheduler.add_job(
            self._start_paced_run,
            "date",
            run_date=run_at,
            args=[job_id],
            id=job_id,
            name=job_id,
            misfire_grace_time=None,
            replace_existing=True,
        )

    async def _start_paced_run(self, job_id: str) -> None:
        job = self._paced.get(job_id)
        if job is not None:  # else removed after this turn was handed to the executor
            self._runs[job_id] = asyncio.create_task(self._run_paced(job_id, job), name=job_id)

    async def _run_paced(self, job_id: str, job: PacedJob) -> None:
        try:
            seconds = await job.run()
        except Exception:
            log.exception("paced job %r failed", job.name)
            seconds = RETRY_FAILED_PACED_SECONDS
        if self._paced.get(job_id) is job:  # not removed meanwhile
            self._run_paced_in(job_id, max(seconds, 0.0))

    async def _start_run(self, job_id: str, job: PeriodicJob) -> None:
        if self.scheduler.get_job(job_id) is None:
            return  # removed after this turn was handed to the executor
        previous = self._runs.get(job_id)
        if previous is not None and not previous.done():
            return  # still going: this turn is skipped
        self._runs[job_id] = asyncio.create_task(_run(job), name=job_id)


async def _run(job: PeriodicJob) -> None:
    try:
        await job.run()
    except Exception:
        log.exception("periodic job %r failed", job.name)
