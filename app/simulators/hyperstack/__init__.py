"""The Hyperstack simulator: `HyperstackSimulator` state and `build_app(sim)` serving its API."""

from app.simulators.hyperstack.app import build_app
from app.simulators.hyperstack.simulator import HyperstackSimulator

__all__ = ["HyperstackSimulator", "build_app"]
