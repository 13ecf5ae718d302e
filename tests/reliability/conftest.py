"""Reliability tests run the service in live mode against the simulators, as the watcher's do."""

import pytest

from app.settings import Settings


@pytest.fixture
def settings(live_mode_settings: Settings) -> Settings:
    """Live mode pointed at the simulators, with everything tuned to be quick."""
    return live_mode_settings
