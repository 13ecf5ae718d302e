"""Each provider's simulator by the provider's name: the one place that lists them."""

from collections.abc import Callable

from starlette.applications import Starlette

from app.simulators import hyperstack, quantacloud, verda

# A new simulator's ASGI app; its state is on `app.state.simulator`. Where each is served and
# the credentials it accepts are in its provider's spec (`ProviderSpec.simulator`).
BUILDERS: dict[str, Callable[[], Starlette]] = {
    "verda": verda.create_app,
    "hyperstack": hyperstack.create_app,
    "quantacloud": quantacloud.create_app,
}


def new_simulator(provider: str) -> Starlette:
    """A new simulator of `provider`; LookupError if it has none."""
    try:
        return BUILDERS[str(provider)]()
    except KeyError:
        raise LookupError(f"no simulator of {str(provider)!r}") from None
