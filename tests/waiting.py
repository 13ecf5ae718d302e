"""Wait for something to become true without fixed sleeps."""

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from asgi_lifespan import LifespanManager
from prometheus_client import REGISTRY
from starlette.types import ASGIApp

from app.providers.base import VM, ProviderAdapter, VMState

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
    check: Callable[[], Awaitable[T | None]], seconds: float = 5.0, interval: float = 0.03
) -> T:
    """Call `check` until it returns something truthy (and return that), or fail the test."""
    deadline = time.monotonic() + seconds
    while True:
        result = await check()
        if result:
            return result
        assert time.monotonic() < deadline, f"condition not reached within {seconds} s"
        await asyncio.sleep(interval)


def eventually_sync(
    check: Callable[[], T | None], seconds: float = 5.0, interval: float = 0.05
) -> T:
    """`eventually` for tests that drive other processes from plain (not async) code."""
    deadline = time.monotonic() + seconds
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, f"condition not reached within {seconds} s"
        time.sleep(interval)


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
