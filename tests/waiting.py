"""Wait for something to become true without fixed sleeps."""

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from app.providers.base import VM, ProviderAdapter, VMState

T = TypeVar("T")


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


async def vm_reaches(
    adapter: ProviderAdapter, vm_id: str, state: VMState, seconds: float = 5.0
) -> VM:
    """Poll the adapter until the VM is in `state`; returns it as last read."""

    async def check() -> VM | None:
        vm = await adapter.get_vm(vm_id)
        return vm if vm is not None and vm.state is state else None

    return await eventually(check, seconds)
