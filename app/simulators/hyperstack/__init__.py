"""The Hyperstack simulator: `HyperstackSimulator` state and `build_app(sim)` serving its API."""

from starlette.applications import Starlette

from app.simulators.hyperstack.app import build_app
from app.simulators.hyperstack.simulator import API_KEY, HyperstackSimulator

__all__ = ["API_KEY", "HyperstackSimulator", "build_app", "create_app"]


def create_app() -> Starlette:
    """A new simulated Hyperstack: its API under `/v1`, its control API under `/_sim`."""
    return build_app(HyperstackSimulator())
