"""The simulated Verda (formerly DataCrunch) public API, at its real paths under `/v1`."""

from app.simulators.verda.routes import build_app
from app.simulators.verda.simulator import VerdaSimulator

__all__ = ["VerdaSimulator", "build_app"]
