"""The service, watcher running, against the simulators served on a real socket; and the
watcher in memory on a FakeAdapter (tests/watcher/in_memory.py)."""

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.providers import fake, registry
from app.settings import Settings
from tests.watcher.in_memory import InMemory


@pytest.fixture
def settings(live_mode_settings: Settings) -> Settings:
    """Live mode pointed at the simulators, with everything tuned to be quick."""
    return live_mode_settings


@pytest.fixture
async def memory(engine: AsyncEngine, settings: Settings) -> AsyncIterator[InMemory]:
    """The watcher in memory, on this test's database, with the fake provider offered."""
    with registry.offering(fake.SPEC):
        yield InMemory(engine, settings)
