"""Wait for something to become true without fixed sleeps."""

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from asgi_lifespan import LifespanManager
from prometheus_client import REGISTRY
from starlette.types import ASGIApp

from app.providers.base import VM, ProviderAdapter, VMState
from tests.clock import FakeClock

T = TypeVar("T")
# Bounds for a hang, not a speed claim: on a loaded machine migrating a new database or stopping
# the background tasks has taken longer than asgi-lifespan's default 5 s.
LIFESPAN_TIMEOUT_SECONDS = 60


def started(app: ASGIApp) -> LifespanManager:
    """The app's lifespan as a context manager: started on entry, stopped on exit."""
    return LifespanManager(
        app, startup_timeout=LIFESPAN_TIMEOUT_SECONDS, shutdown_timeout=LIFESPAN_TIMEOUT_SECONDS
    )


async def eventually(
    check: Callable[[], Awaitable[T | None]],
    seconds: float = 5.0,
    interval: float = 0.03,
    *,
    clock: FakeClock | None = None,
    what: str | Callable[[], object] | None = None,
) -> T:
    """Call `check` until it returns something truthy (and return that), or fail the test.

    With a `clock`, time passes on it instead: it is advanced by `interval` between calls,
    nothing sleeps, and `seconds` is counted on it (for a simulator on an injected clock).
    `what` names the awaited condition in the failure; a callable is called then, to show
    the state it was left in."""
    deadline = _Deadline(seconds, what, clock)
    while True:
        result = await check()
        if result:
            return result
        deadline.check()
        if clock is None:
            await asyncio.sleep(interval)
        else:
            clock.advance(interval)


def eventually_sync(
    check: Callable[[], T | None],
    seconds: float = 5.0,
    interval: float = 0.05,
    *,
    clock: FakeClock | None = None,
    what: str | Callable[[], object] | None = None,
) -> T:
    """`eventually` for tests that drive other processes, threads or a browser from plain (not
    async) code."""
    deadline = _Deadline(seconds, what, clock)
    while True:
        result = check()
        if result:
            return result
        deadline.check()
        if clock is None:
            time.sleep(interval)
        else:
            clock.advance(interval)


class _Deadline:
    """When `eventually` gives up, and what it says then."""

    def __init__(
        self,
        seconds: float,
        what: str | Callable[[], object] | None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.clock = clock or time.monotonic
        self.seconds = seconds
        self.at = self.clock() + seconds
        self.what = what

    def check(self) -> None:
        """Fail the test if the time is up."""
        if self.clock() < self.at:
            return
        said = self.what() if callable(self.what) else self.what
        if said is None:
            raise AssertionError(f"condition not reached within {self.seconds} s")
        raise AssertionError(f"not reached within {self.seconds} s: {said}")


async def vm_reaches(
    adapter: ProviderAdapter, vm_id: str, state: VMState, seconds: float = 5.0
) -> VM:
    """Poll the adapter until the VM is in `state`; returns it as last read."""

    async def check() -> VM | None:
        vm = await adapter.get_vm(vm_id)
        return vm if vm is not None and vm.state is state else None

    return await eventually(check, seconds)


def poll_count(provider: str) -> float:
    """Stock reads of `provider` completed so far in this process (the metric's count)."""
    return (
        REGISTRY.get_sample_value("autoprovision_poll_seconds_count", {"provider": provider}) or 0.0
    )


async def polled(provider: str, times: int = 3, seconds: float = 5.0) -> None:
    """Wait until the watcher has read `provider`'s stock `times` more times.

    A read is counted when it returns, and the next one begins only after the previous one's
    deploy pass: after three more, the second began after this call and its deploy pass is
    over. So the watcher has acted on what the provider showed when this was called."""
    start = poll_count(provider)

    async def check() -> bool:
        return poll_count(provider) >= start + times

    await eventually(check, seconds, interval=0.01)
