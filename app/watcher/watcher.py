"""The watcher: wires pollers, the matcher, the deployer and the follower together.

Hot path, per provider poll: stock read (HTTP) -> match (memory) -> claims (one commit) ->
create calls (HTTP, concurrent). The waiting orders are kept in memory and re-read in the
background, so the hot path has no database read in it.
"""

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.catalogue import Provider
from app.core.clock import utcnow
from app.core.market import Fees, OfferKey
from app.core.states import OrderStatus
from app.providers.base import Offer, ProviderAdapter
from app.providers.registry import (
    boot_deadlines,
    enabled_providers,
    planned_providers,
    poll_periods,
)
from app.services import attempts, machine_reports, orders, provider_status
from app.services.claims import Intent
from app.services.stock import history as stock_history
from app.services.timeline import Line
from app.settings import Settings
from app.storage.db import session_scope
from app.support.aio import wait_until_set
from app.support.metrics import ORDERS, STOCK_TO_CREATE_SECONDS
from app.support.schedule import PacedJob, PeriodicJob, Schedule
from app.support.secrets import SecretBoxLoader
from app.watcher.balances import BalanceRead, ProviderBalances
from app.watcher.book import OfferBook
from app.watcher.context import WatcherContext
from app.watcher.deployer import Deployer
from app.watcher.dry_run import WouldDeploy
from app.watcher.follower import Follower
from app.watcher.history import StockHistory
from app.watcher.images import ImageLists
from app.watcher.match import Assignment, assign, price_floors
from app.watcher.meter import Meter
from app.watcher.notes import WaitingNotes, near_misses, still_waiting
from app.watcher.poller import ProviderPoller
from app.watcher.reconciler import Reconciler
from app.watcher.running import RunningWatch
from app.watcher.snapshots import SnapshotWriter
from app.watcher.terminator import Terminator
from app.watcher.waiting import WaitingBook

log = logging.getLogger(__name__)
WATCHER_JOBS = "watcher"  # the group of the watcher's jobs on the scheduler
STALE_AFTER_PERIODS = 3  # offers older than this many poll periods are not acted on
NOTES_EVERY_SECONDS = 1.0  # near-miss notes are worked out at most this often
MAX_NOTES_PER_WRITE = 200  # the rest are written on later turns, one batch a turn
DRAIN_SECONDS = 20.0
HISTORY_FLUSH_SECONDS = 1.0  # stock history is written in a batch this often
HISTORY_PRUNE_SECONDS = 3600.0
MIN_TERMINATE_WAIT_SECONDS = 0.05  # between terminator rounds, however soon a delete is due


class Watcher:
    """Everything that runs in the background of one service process."""

    def __init__(
        self,
        *,
        settings: Settings,
        adapters: dict[Provider, ProviderAdapter],
        sessionmaker: async_sessionmaker[AsyncSession],
        read_sessionmaker: async_sessionmaker[AsyncSession],
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = utcnow,
        secret_boxes: SecretBoxLoader | None = None,
        schedule: Schedule | None = None,
    ) -> None:
        self.settings = settings
        # The process's scheduler runs the watcher's jobs; a watcher started alone (tests)
        # brings one of its own.
        self.own_schedule = schedule is None
        self.schedule = Schedule() if schedule is None else schedule
        self.adapters = adapters
        self.sessionmaker = sessionmaker
        self.read_sessionmaker = read_sessionmaker
        self.fees = Fees(settings.fee_percent, settings.fee_flat_per_hour)
        self.periods = poll_periods(settings)
        self.planned = planned_providers(settings)
        # `clock` (monotonic seconds) times stock reads, cool-downs and pauses: the book and
        # the pollers must share it. `wall_clock` is for what is compared with stored times.
        self.clock = clock
        self.wall_clock = wall_clock
        self.book = OfferBook(cooldown_seconds=settings.capacity_cooldown_seconds, clock=clock)
        self.waiting = WaitingBook()
        self.notes = WaitingNotes()
        self.would_deploy = WouldDeploy() if settings.dry_run else None
        self.balances = ProviderBalances(adapters, clock=wall_clock, keep=self._keep_balance)
        self.snapshots = SnapshotWriter(
            sessionmaker, self.book, lambda provider: adapters[provider].budget.remaining()
        )
        self.history = StockHistory(sessionmaker, fees=self.fees, clock=wall_clock)
        parts = WatcherContext(
            adapters=adapters,
            sessionmaker=sessionmaker,
            read_sessionmaker=read_sessionmaker,
            clock=wall_clock,
        )
        self.images = ImageLists(parts)
        self.pollers = {
            provider: self._poller(provider, adapter) for provider, adapter in adapters.items()
        }
        self.deployer = Deployer(
            parts,
            book=self.book,
            on_settled=self.nudge,
            pause_provider=lambda p, seconds: self.pollers[p].pause(seconds),
            on_outcome=self._after_create,
            billing_hour_seconds=settings.billing_hour_seconds,
            secret_boxes=secret_boxes or SecretBoxLoader(settings),
            report_url=machine_reports.report_url_for(settings),
        )
        self.follower = Follower(
            parts,
            outcome_check_seconds=settings.outcome_check_seconds,
            create_timeout_seconds=settings.provider_create_timeout_seconds,
            cluster_assembly_seconds=settings.cluster_assembly_minutes * 60,
            boot_deadlines=boot_deadlines(settings),
            in_flight=lambda: self.deployer.in_flight_ids,
            on_settled=self.nudge,
        )
        self.reconciler = Reconciler(
            parts,
            grace_seconds=settings.provider_create_timeout_seconds + settings.outcome_check_seconds,
            delete_untracked=settings.delete_untracked_vms,
        )
        self.terminator = Terminator(parts)
        self.meter = Meter(
            parts,
            grace_minutes=settings.unpaid_grace_minutes,
            low_balance_hours=settings.low_balance_hours,
            on_terminate=self.nudge_terminator,
            lead=lambda provider: timedelta(
                seconds=settings.follow_seconds + self.terminator.delete_seconds(provider)
            ),
        )
        self.running = RunningWatch(parts)
        self._terminate = asyncio.Event()
        # Kinds with an open attempt at providers that cannot name VMs, as last read: no
        # second create of such a kind goes out until the first is resolved (see adoption).
        self.unresolved_kinds: set[OfferKey] = set()
        self._pass_lock = asyncio.Lock()
        self._noted_at = 0.0
        self._noted_situation: object = None
        self._noting: asyncio.Task[None] | None = None
        self._unwritten: list[Line] = []  # notes worked out, not written yet
        self._refresh = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def _poller(self, provider: Provider, adapter: ProviderAdapter) -> ProviderPoller:
        async def on_offers(offers: list[Offer], started: float, period: float) -> None:
            await self.on_offers(provider, offers, started, period=period)

        async def on_error(error: str) -> None:
            self.book.failed(provider, error)
            try:
                await self.snapshots.maybe_write(provider)
            except Exception:
                log.exception("keeping %s's read error for the API failed", provider)

        return ProviderPoller(
            adapter,
            period=self.periods[provider],
            wanted=lambda: str(provider) in self.waiting.providers,
            on_offers=on_offers,
            on_error=on_error,
            clock=self.clock,
            history_period=self.settings.history_poll_seconds,
            planned=provider in self.planned,
            machines=lambda: self.waiting.machines_for(str(provider)),
        )

    async def start(self) -> None:
        """Note which providers can deploy, read the waiting orders, then start every loop."""
        async with session_scope(self.sessionmaker) as session:
            enabled = set(enabled_providers(self.settings))
            await orders.note_disabled_providers(session, enabled=enabled)
            # This process is the only writer now: what the last one left open is closed.
            await stock_history.close_abandoned(session)
        await self.refresh_waiting()
        self._spawn(self._refresh_loop(), "refresh waiting orders")
        self._spawn(self._terminate_loop(), "terminate machines")
        self.schedule.add(WATCHER_JOBS, self.jobs())
        if self.own_schedule:
            self.schedule.start()

    def jobs(self) -> list[PeriodicJob | PacedJob]:
        """The watcher's periodic jobs, on the process's scheduler while this replica holds
        the lease: each provider's stock reads, paced by its budget, and the rest on their
        periods. The loops woken by events (the waiting orders, terminations) run apart: see
        the architecture doc. The replica's housekeeping is `replica_jobs`."""
        every = self.settings.follow_seconds
        jobs: list[PeriodicJob | PacedJob] = [
            PacedJob(f"read {provider} stock", poller.step)
            for provider, poller in self.pollers.items()
        ]
        jobs += [
            PeriodicJob("follow VMs", every, self.follower.tick),
            PeriodicJob("bill running machines", every, self.meter.tick),
            PeriodicJob(
                "watch running VMs", self.settings.running_check_seconds, self.running.tick
            ),
            PeriodicJob("expire orders", every, self.expire_orders),
            PeriodicJob("count orders", every, self.count_orders),
            PeriodicJob("reconcile", self.settings.reconcile_seconds, self.reconciler.tick),
            PeriodicJob("record stock history", HISTORY_FLUSH_SECONDS, self.history.flush),
            PeriodicJob("prune stock history", HISTORY_PRUNE_SECONDS, self.prune_history),
        ]
        if self.settings.provider_balance_seconds > 0:
            jobs.append(
                PeriodicJob(
                    "read provider balances",
                    self.settings.provider_balance_seconds,
                    self.balances.read_all,
                )
            )
        if self.settings.provider_images_seconds > 0:
            jobs.append(
                PeriodicJob(
                    "read provider images",
                    self.settings.provider_images_seconds,
                    self.images.read_all,
                )
            )
        return jobs

    def _after_create(self, provider: Provider) -> None:
        if self.settings.provider_balance_seconds > 0:
            self.balances.read_soon(provider)

    async def _keep_balance(self, provider: Provider, read: BalanceRead) -> None:
        async with session_scope(self.sessionmaker) as session:
            await provider_status.keep_balance(
                session,
                provider=str(provider),
                amount=read.amount,
                read_at=read.read_at,
                error=read.error,
            )

    async def expire_orders(self) -> None:
        """Waiting orders past their expiry stop waiting."""
        async with session_scope(self.sessionmaker) as session:
            await orders.expire_due(session, now=self.wall_clock())

    async def prune_history(self) -> None:
        """Forget stock history older than its retention."""
        before = self.wall_clock() - timedelta(days=self.settings.stock_history_days)
        async with session_scope(self.sessionmaker) as session:
            await stock_history.prune(session, before=before)

    async def count_orders(self) -> None:
        """The orders-by-status gauge."""
        async with session_scope(self.read_sessionmaker) as session:
            counts = await orders.count_by_status(session)
        for status in OrderStatus:
            ORDERS.labels(str(status)).set(counts.get(status, 0))

    async def stop(self) -> None:
        """Stop taking new work, let creates in flight finish (bounded), stop the loops."""
        if self._noting is not None:
            self._noting.cancel()
        await self.schedule.remove(WATCHER_JOBS)
        if self.own_schedule:
            await self.schedule.shutdown()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.notes_written()
        await self.deployer.drain(DRAIN_SECONDS)
        self.deployer.close()
        await self.balances.stop()

    def nudge(self) -> None:
        """Re-read the waiting orders soon (an order was placed, cancelled or released)."""
        self._refresh.set()

    def nudge_terminator(self) -> None:
        """Send the deletes of terminating machines now (a terminate was committed)."""
        self._terminate.set()

    async def refresh_waiting(self) -> None:
        """Catch up with the waiting orders and their accounts' balances."""
        async with session_scope(self.read_sessionmaker) as session:
            await self.waiting.refresh(session)
            self.unresolved_kinds = await attempts.open_serial_kinds(session)
        self.notes.keep_only(self.waiting.orders.keys())
        if self.would_deploy is not None:
            self.would_deploy.keep_only(self.waiting.orders.keys())

    async def on_offers(
        self, provider: Provider, offers: list[Offer], started: float, period: float | None = None
    ) -> None:
        """A read of one provider that began at `started`, polled every `period` seconds (its
        usual one by default): act on it, then note it for the history and the API."""
        read_at = self.wall_clock()
        forecasts = self.adapters[provider].stock_forecasts()  # of this read: before any await
        self.book.update(provider, offers, started=started)
        try:
            await self.deploy_pass()
        finally:
            # After the pass has launched its creates; memory only, written by a job.
            used = self.periods[provider] if period is None else period
            self.history.observe(str(provider), offers, read_at=read_at, period=used)
            self.history.observe_forecasts(str(provider), forecasts, read_at=read_at)
        await self.snapshots.maybe_write(provider)

    async def deploy_pass(self) -> None:
        """Match the waiting orders against the freshest offers and send the creates."""
        async with self._pass_lock:
            offers = self._fresh_offers()
            if self.would_deploy is not None:
                self.would_deploy.shown(o.key for o in offers)
            # Orders whose cap is below every offer for their machine cannot take one: the hot
            # path does not look at them (near misses are for the notes, off this path).
            floors = price_floors(offers, fees=self.fees)
            candidates = self.waiting.candidates(floors, at_least=floors)
            result = assign(
                candidates,
                offers,
                fees=self.fees,
                excluded=self._excluded(),
                funds=self.waiting.funds,
                provider_funds=self.balances.headroom(),
                near_misses=False,
            )
            intents: list[Intent] = []
            if self.would_deploy is not None:
                await self._tell_would_deploy(result.assignments)
            elif result.assignments:
                intents, gone = await self.deployer.claim(result.assignments)
                for intent in intents:
                    self.balances.sent(intent.offer.provider, intent.offer.price_per_hour)
                # Orders whose claim failed only for money stay: they are still waiting.
                for order_id in gone | {i.order_id for i in intents}:
                    self.waiting.discard(order_id)
        for intent in intents:
            taken = self.book.take(intent.offer.key)
            seen = self.book.seen_for(intent.offer.key)
            if seen is not None:
                STOCK_TO_CREATE_SECONDS.labels(str(intent.offer.provider)).observe(seen)
            self.deployer.launch(intent, taken)
        if len(intents) < len(result.assignments) and self.would_deploy is None:
            self.nudge()  # some claims lost a race or the balance moved: re-read
        self._note_why_waiting()

    async def _tell_would_deploy(self, assignments: list[Assignment]) -> None:
        """Dry run: tell each order what it would have taken; no claim, no hold, no create."""
        assert self.would_deploy is not None
        lines = self.would_deploy.fresh(assignments)
        if lines:
            await self.deployer.write_notes(lines)

    def _excluded(self) -> frozenset[tuple[str, str, str]]:
        """Offers no create may go to now: cooling down, or of a kind still being resolved."""
        serial = self.unresolved_kinds.union(self.deployer.serial_in_flight.values())
        return self.book.cooling() | serial

    def _fresh_offers(self) -> list[Offer]:
        max_age = {p: period * STALE_AFTER_PERIODS for p, period in self.periods.items()}
        return self.book.current(max_age=max_age)

    def _note_why_waiting(self) -> None:
        """Now and then: start telling orders why matching stock did not go to them, in a task
        of its own so the pass (and the next read) does not wait for it."""
        now = self.clock()
        if now - self._noted_at < NOTES_EVERY_SECONDS:
            return
        if self._noting is not None and not self._noting.done():
            return
        self._noted_at = now
        self._noting = asyncio.create_task(self._write_why_waiting(), name="note why waiting")

    async def notes_written(self) -> None:
        """Wait for the notes being worked out, if any (tests, and stopping)."""
        if self._noting is not None:
            await asyncio.gather(self._noting, return_exceptions=True)

    async def _write_why_waiting(self) -> None:
        offers = self._fresh_offers()
        excluded = self._excluded()
        headroom = self.balances.headroom()
        situation = (
            frozenset((o.key, o.price_per_hour, o.available) for o in offers),
            excluded,
            self.waiting.version,
            frozenset(headroom.items()),
        )
        batch: list[Line] = []
        try:
            if situation != self._noted_situation:
                # A full match with near misses over every candidate: a second of CPU with
                # 100,000 orders, so in a thread, on copies, while the loop serves the hot
                # path; and once per situation, not once per batch of notes written.
                groups = self.waiting.groups({o.machine for o in offers})
                funds = dict(self.waiting.funds)
                result = await asyncio.to_thread(
                    near_misses, groups, offers, self.fees, excluded, funds, headroom
                )
                waiting = self.waiting.orders  # orders gone meanwhile need no note
                result = still_waiting(result, waiting)
                self._unwritten.extend(
                    self.notes.fresh(result, waiting, self.waiting.funds, headroom)
                )
                self._noted_situation = situation
            # Told means written: the notes wait their turn, MAX_NOTES_PER_WRITE at a time.
            batch = self._unwritten[:MAX_NOTES_PER_WRITE]
            del self._unwritten[:MAX_NOTES_PER_WRITE]
            waiting = self.waiting.orders
            if live := [line for line in batch if line.order_id in waiting]:
                await self.deployer.write_notes(live)
        except Exception:
            self._unwritten[:0] = batch
            log.exception("noting why orders wait failed")

    async def _refresh_loop(self) -> None:
        while True:
            await wait_until_set(self._refresh, self.settings.waiting_refresh_seconds)
            self._refresh.clear()
            try:
                await self.refresh_waiting()
            except Exception:
                log.exception("reading the waiting orders failed")

    async def _terminate_loop(self) -> None:
        wait = self.settings.follow_seconds
        while True:
            await wait_until_set(self._terminate, wait)
            self._terminate.clear()
            try:
                due_in = await self.terminator.tick()
            except Exception:
                log.exception("terminating machines failed")
                due_in = None
            # The next delete due, or the usual period (a terminate elsewhere, on another
            # replica, is found then).
            wait = self.settings.follow_seconds if due_in is None else due_in
            wait = min(max(wait, MIN_TERMINATE_WAIT_SECONDS), self.settings.follow_seconds)

    def _spawn(self, coroutine: Coroutine[Any, Any, None], name: str) -> None:
        self._tasks.append(asyncio.create_task(coroutine, name=name))
