"""Webhook tests: the service (watcher and dispatcher running) against the simulators, plus a
receiver on a real socket."""

from collections.abc import Iterator

import pytest

from app.settings import Settings
from tests.webhooks.receiver import Receiver, running_receiver

QUICK_SCHEDULE = [0, 0.3, 0.3, 0.3, 0.3, 0.3]


@pytest.fixture
def settings(live_mode_settings: Settings) -> Settings:
    """Live mode against the simulators; receivers on loopback allowed; retries in tenths."""
    return live_mode_settings.model_copy(
        update={
            "webhook_allow_private": True,
            "webhook_retry_schedule": QUICK_SCHEDULE,
            "webhook_poll_seconds": 0.1,
            "webhook_timeout_seconds": 2.0,
        }
    )


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A webhook receiver on 127.0.0.1."""
    with running_receiver() as running:
        yield running
