"""A background loop that waits on a wake-up event stops when it is cancelled, even when the
cancellation and the wake-up land in the same step of the event loop."""

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable

import pytest

from app.support.aio import wait_until_set

Waiter = Callable[[asyncio.Event, float], Awaitable[object]]


async def wait_for_waiter(event: asyncio.Event, seconds: float) -> None:
    """What the loops did before: asyncio.wait_for around the event."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)


async def stops_when_cancelled_as_woken(waiter: Waiter) -> bool:
    """Run a wake-up loop, wake it and cancel it in the same step; did it stop?"""
    event = asyncio.Event()

    async def loop() -> None:
        while True:
            await waiter(event, 60)
            event.clear()

    task = asyncio.create_task(loop())
    for _ in range(3):  # let the loop reach its wait
        await asyncio.sleep(0)
    event.set()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=0.5)
    task.cancel()  # a loop that swallowed the first one gets another, so the test ends cleanly
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait({task}, timeout=0.5)
    return bool(done) and task.cancelled()


async def test_a_loop_cancelled_as_it_is_woken_stops() -> None:
    assert await stops_when_cancelled_as_woken(wait_until_set)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="asyncio.wait_for keeps the cancel on 3.12")
async def test_control_the_same_step_loses_the_cancel_with_wait_for_on_3_11() -> None:
    # The setup above does hit the race: the old wait would never stop.
    assert not await stops_when_cancelled_as_woken(wait_for_waiter)


async def test_it_says_whether_the_event_was_set_or_the_time_ran_out() -> None:
    event = asyncio.Event()
    assert await wait_until_set(event, 0.01) is False
    event.set()
    assert await wait_until_set(event, 60) is True
