"""Every provider's simulator in one ASGI app, each under its own prefix at its real paths."""

from starlette.applications import Starlette
from starlette.routing import Mount

from app.providers.registry import SPECS
from app.simulators.core import ProviderSimulator
from app.simulators.registry import new_simulator


def create_simulator_app() -> Starlette:
    """Each registered provider's simulator mounted where its spec says (`/verda/v1/...`),
    each with its control API (`/verda/_sim/...`)."""
    mounts = [
        (spec.name, spec.simulator.path, new_simulator(spec.name))
        for spec in SPECS
        if spec.simulator is not None
    ]
    app = Starlette(routes=[Mount(path, app=sim_app) for _, path, sim_app in mounts])
    simulators: dict[str, ProviderSimulator] = {
        name: sim_app.state.simulator for name, _, sim_app in mounts
    }
    app.state.simulators = simulators
    return app
