"""A faithful local copy of QuantaCloud's GPU-cloud API (`/api/v1`) and its `/_sim` control API."""

from app.simulators.quantacloud.api import build_app
from app.simulators.quantacloud.simulator import QuantaCloudSimulator

__all__ = ["QuantaCloudSimulator", "build_app"]
