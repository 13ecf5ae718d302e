"""Sends the deletes of terminating machines until their providers show them gone.

The intent was committed first (services/terminations.py), so this only ever acts on what the
database says: a process killed between the intent and the delete, or during the delete, leaves
an attempt `terminating`, and whichever process holds the watcher lease next sends the delete
(again: every provider's delete is harmless on a VM already deleted or being deleted).
"""

import asyncio
import logging
import time
from collections import defaultdict
from datetime import timedelta

from app.core.catalogue import Provider
from app.providers.base import (
    HeldBack,
    ProviderAdapter,
    ProviderError,
    RateLimited,
    VMState,
    urgent,
)
from app.providers.registry import display_name, vm_named
from app.services import terminations
from app.storage.db import session_scope
from app.storage.models import Attempt
from app.watcher.context import WatcherContext
from app.watcher.scripts import delete_startup_script

log = logging.getLogger(__name__)
RETRY_FIRST_SECONDS = 1.0  # a delete refused (still booting) or failed is sent again after this,
RETRY_MAX_SECONDS = 60.0  # doubling each time up to this
CHECK_AGAIN_SECONDS = 0.5  # a delete taken, the VM not gone yet: looked at again after this
# How long a delete takes to be answered, until one has been measured at a provider; and how
# much each new measure counts (a moving average: one slow answer moves it a third of the way).
DEFAULT_DELETE_SECONDS = 0.5
LATENCY_WEIGHT = 1 / 3


def retry_after(attempts: int) -> timedelta:
    """How long after its `attempts`-th failed delete the next one goes."""
    return timedelta(seconds=min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS * 2 ** max(attempts, 0)))


def delete_retry_in(error: ProviderError, attempts: int) -> timedelta:
    """When a delete that failed with `error` goes again: when a rate limit says there is room
    (the provider's Retry-After, or our own budget's wait; at most RETRY_MAX_SECONDS), else
    after the back-off for its `attempts`-th failure. A machine waiting on a rate limit bills
    on, so it is not left to the back-off's doubling."""
    if isinstance(error, RateLimited) and error.retry_after is not None:
        wait = min(max(error.retry_after, CHECK_AGAIN_SECONDS), RETRY_MAX_SECONDS)
        return timedelta(seconds=wait)
    return retry_after(attempts)


def not_deleted(name: str, vm_id: str, error: ProviderError, *, sent: bool) -> str:
    """What the timeline says of a delete that did not go through: refused or failed at the
    provider (`sent`), or held back by our own rate-limit budget before it went."""
    if not sent:
        return f"The delete of {vm_named(vm_id)} waits for {name}'s rate limit ({error.message})"
    return f"{name} did not take the delete of {vm_named(vm_id)} ({error.message})"


class Terminator:
    """One tick: adopt creates that settled for terminating orders, then send every delete due."""

    def __init__(self, context: WatcherContext) -> None:
        self.context = context
        # Only these: a machine at a provider this process has no credentials for waits for
        # a process that has them.
        self._providers = [str(p) for p in context.adapters]
        self._delete_seconds: dict[str, float] = {}  # provider -> moving average

    def delete_seconds(self, provider: str) -> float:
        """How long a delete at `provider` takes to be answered, as measured here (the meter
        asks for a limit's terminate this much ahead, so the delete lands in time)."""
        return self._delete_seconds.get(provider, DEFAULT_DELETE_SECONDS)

    async def tick(self) -> float | None:
        """Every terminating machine whose delete is due gets it (one provider at a time each).
        Returns the seconds until the next one is due (None: none is waiting)."""
        async with session_scope(self.context.sessionmaker) as session:
            await terminations.adopt(session, now=self.context.clock())
        async with session_scope(self.context.read_sessionmaker) as session:
            due = await terminations.deletes_due(
                session, now=self.context.clock(), providers=self._providers
            )
        by_provider: dict[str, list[Attempt]] = defaultdict(list)
        for attempt in due:
            by_provider[attempt.provider].append(attempt)
        await asyncio.gather(*(self._provider(p, items) for p, items in by_provider.items()))
        async with session_scope(self.context.read_sessionmaker) as session:
            soonest = await terminations.next_delete_due(session, providers=self._providers)
        return (
            None if soonest is None else max(0.0, (soonest - self.context.clock()).total_seconds())
        )

    async def _provider(self, provider: str, due: list[Attempt]) -> None:
        adapter = self.context.adapters[Provider(provider)]
        for attempt in due:
            try:
                with urgent():  # the delete and the reads it needs go before stock reads
                    await self._delete(adapter, attempt)
            except Exception:
                log.exception("deleting %s failed", attempt.id)

    async def _delete(self, adapter: ProviderAdapter, attempt: Attempt) -> None:
        assert attempt.provider_vm_id is not None  # only attempts that own a VM terminate
        if attempt.ended_at is not None and await self._check(adapter, attempt):
            return  # the delete was taken before: it is gone now, or on its way
        if attempt.billed_from is None:
            await self._note_if_running(adapter, attempt)
        sent_at = time.monotonic()
        try:
            await adapter.delete_vm(attempt.provider_vm_id)
        except ProviderError as exc:
            sent = not isinstance(exc, HeldBack)
            async with session_scope(self.context.sessionmaker) as session:
                await terminations.note_delete_failed(
                    session,
                    attempt_id=attempt.id,
                    now=self.context.clock(),
                    retry_in=delete_retry_in(exc, attempt.delete_attempts),
                    message=not_deleted(
                        display_name(adapter.provider), attempt.provider_vm_id, exc, sent=sent
                    ),
                    sent=sent,
                )
            return
        self._measured(attempt.provider, time.monotonic() - sent_at)
        accepted_at = self.context.clock()
        async with session_scope(self.context.sessionmaker) as session:
            await terminations.note_delete_accepted(
                session,
                attempt_id=attempt.id,
                now=accepted_at,
                check_in=timedelta(seconds=CHECK_AGAIN_SECONDS),
            )
        await self._check(adapter, attempt)

    def _measured(self, provider: str, seconds: float) -> None:
        before = self._delete_seconds.get(provider)
        self._delete_seconds[provider] = (
            seconds if before is None else before + LATENCY_WEIGHT * (seconds - before)
        )

    async def _note_if_running(self, adapter: ProviderAdapter, attempt: Attempt) -> None:
        """A machine terminated before we saw it run may run by now (Hyperstack refuses the
        delete until it has been created): its provider bills it from then, so it is paid from
        when this sees it running, not refunded whole."""
        assert attempt.provider_vm_id is not None
        try:
            vm = await adapter.get_vm(attempt.provider_vm_id)
        except ProviderError:
            return
        if vm is not None and vm.state is VMState.RUNNING:
            async with session_scope(self.context.sessionmaker) as session:
                await terminations.note_running(
                    session, attempt_id=attempt.id, now=self.context.clock()
                )

    async def _check(self, adapter: ProviderAdapter, attempt: Attempt) -> bool:
        """After a delete was taken: settle the machine if the provider shows it gone. True
        when it is gone or still being deleted (nothing to send); False when the delete has
        to go again (the VM is there as before, or its status could not be read)."""
        assert attempt.provider_vm_id is not None
        try:
            vm = await adapter.get_vm(attempt.provider_vm_id)
        except ProviderError as exc:
            log.info("after deleting %s: %s", attempt.id, exc)
            return False
        if vm is not None and (vm.state is not VMState.GONE or vm.leftovers):
            if vm.state is VMState.DELETING and not vm.leftovers:
                await self._check_again(attempt)
                return True
            return False  # there as before, or a part of it still bills: the delete goes again
        async with session_scope(self.context.sessionmaker) as session:
            await terminations.settle_terminated(
                session, attempt_id=attempt.id, now=self.context.clock()
            )
        await delete_startup_script(adapter, attempt.vm_name)  # its VM is gone
        return True

    async def _check_again(self, attempt: Attempt) -> None:
        async with session_scope(self.context.sessionmaker) as session:
            await terminations.note_delete_accepted(
                session,
                attempt_id=attempt.id,
                now=self.context.clock(),
                check_in=timedelta(seconds=CHECK_AGAIN_SECONDS),
            )
