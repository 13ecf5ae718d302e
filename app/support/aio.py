"""Waiting in background loops without losing a cancellation."""

import asyncio


async def wait_until_set(event: asyncio.Event, seconds: float) -> bool:
    """Wait until `event` is set or `seconds` pass; True if it was set."""
    # Not asyncio.wait_for: on Python 3.11 it runs the wait as a second task and, when that task
    # finishes in the same step as the caller is cancelled, returns normally and drops the
    # cancellation; a loop around it then never stops. asyncio.timeout waits in this task.
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True
