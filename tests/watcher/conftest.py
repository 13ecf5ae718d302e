"""The service, watcher running, against the simulators served on a real socket."""

from collections.abc import AsyncIterator, Iterator
from decimal import Decimal

import pytest

from app.providers.registry import simulated
from app.settings import Settings
from app.simulators.app import create_simulator_app
from app.simulators.control import SimControl
from tests.conftest import ADMIN_KEY, SECRET_KEY
from tests.servers import serve_in_thread

BOOT_SECONDS = 0.3


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    """The simulators, shared by the tests of a module (reset before each test)."""
    with serve_in_thread(create_simulator_app()) as url:
        yield url


@pytest.fixture
async def sim(sim_url: str) -> AsyncIterator[SimControl]:
    """The simulators' control API, every simulator reset, with quick boots."""
    async with SimControl(base_url=sim_url) as control:
        await control.reset_all(boot_seconds=BOOT_SECONDS)
        yield control


@pytest.fixture
def settings(database_url: str, sim_url: str, sim: SimControl) -> Settings:
    """Live mode pointed at the simulators, with everything tuned to be quick."""
    return live_settings(database_url, sim_url)


def live_settings(database_url: str, sim_url: str) -> Settings:
    """Live mode pointed at the simulators at `sim_url`, with everything tuned to be quick."""
    settings = Settings(
        _env_file=None,
        database_url=database_url,
        admin_api_key=ADMIN_KEY,
        secret_key=SECRET_KEY,
        mode="live",
        watcher=True,
        fee_percent=Decimal("5"),
        fee_flat_per_hour=Decimal("0.10"),
        follow_seconds=0.1,
        outcome_check_seconds=0.3,
        waiting_refresh_seconds=0.1,
        capacity_cooldown_seconds=0.5,
        provider_timeout_seconds=2,
        provider_create_timeout_seconds=1,
        # Stock is read only for waiting orders: these tests count reads and creates; the
        # history's slow reading has its own tests (test_history.py).
        history_poll_seconds=0,
    )
    return simulated(settings, sim_url, poll_seconds=0.1)
