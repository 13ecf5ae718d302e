"""Reliability tests share the simulators and live-mode settings of the watcher tests."""

from tests.watcher.conftest import settings, sim, sim_url

__all__ = ["settings", "sim", "sim_url"]
