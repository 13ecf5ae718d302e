"""A faithful local copy of QuantaCloud's GPU-cloud API (`/api/v1`) and its `/_sim` control API."""

from starlette.applications import Starlette

from app.simulators.quantacloud.api import build_app
from app.simulators.quantacloud.simulator import API_KEY, QuantaCloudSimulator

__all__ = ["API_KEY", "QuantaCloudSimulator", "build_app", "create_app"]


def create_app() -> Starlette:
    """A new simulated QuantaCloud: its API under `/api/v1`, its control API under `/_sim`."""
    return build_app(QuantaCloudSimulator())
