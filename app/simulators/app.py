"""All three simulators in one ASGI app, each under its own prefix at the provider's real paths."""

from starlette.applications import Starlette
from starlette.routing import Mount

from app.simulators import hyperstack, quantacloud, verda
from app.simulators.core import ProviderSimulator


def create_simulator_app() -> Starlette:
    """`/verda/v1/...`, `/hyperstack/v1/...`, `/quantacloud/api/v1/...`, each with `/_sim`."""
    verda_sim = verda.VerdaSimulator()
    hyperstack_sim = hyperstack.HyperstackSimulator()
    quantacloud_sim = quantacloud.QuantaCloudSimulator()
    app = Starlette(
        routes=[
            Mount("/verda", app=verda.build_app(verda_sim)),
            Mount("/hyperstack", app=hyperstack.build_app(hyperstack_sim)),
            Mount("/quantacloud", app=quantacloud.build_app(quantacloud_sim)),
        ]
    )
    simulators: dict[str, ProviderSimulator] = {
        "verda": verda_sim,
        "hyperstack": hyperstack_sim,
        "quantacloud": quantacloud_sim,
    }
    app.state.simulators = simulators
    return app
