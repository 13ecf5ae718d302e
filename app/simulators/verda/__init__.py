"""The simulated Verda (formerly DataCrunch) public API, at its real paths under `/v1`."""

from starlette.applications import Starlette

from app.simulators.verda.routes import build_app
from app.simulators.verda.simulator import CLIENT_ID, CLIENT_SECRET, VerdaSimulator

__all__ = ["CLIENT_ID", "CLIENT_SECRET", "VerdaSimulator", "build_app", "create_app"]


def create_app() -> Starlette:
    """A new simulated Verda: its API under `/v1`, its control API under `/_sim`."""
    return build_app(VerdaSimulator())
