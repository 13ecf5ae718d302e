"""The list of providers, and what the rest of the service asks of it.

Adding a provider: a package under `app/providers/<name>/` exporting its `SPEC` (and its
simulator under `app/simulators/<name>/`), plus one line in `SPECS`.
"""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pydantic import ValidationError

from app.core.catalogue import Provider
from app.core.market import Abilities
from app.providers import fake, hyperstack, quantacloud, verda
from app.providers.assembly import ASSEMBLED_PREFIX, is_assembled
from app.providers.base import ProviderAdapter, ProviderError
from app.providers.http import Connections
from app.providers.spec import ProviderSpec, Timeouts
from app.providers.verda.cluster_parse import cluster_id_of
from app.settings import ProviderSettings, Settings

SPECS: tuple[ProviderSpec[Any], ...] = (
    verda.SPEC,
    hyperstack.SPEC,
    quantacloud.SPEC,
    fake.SPEC,
)

# Specs for tests only that a test offers right now (see `offering`), by name.
_offered_for_tests: dict[str, ProviderSpec[Any]] = {}


def _known() -> dict[str, ProviderSpec[Any]]:
    return {**{spec.name: spec for spec in SPECS}, **_offered_for_tests}


def spec_for(provider: str) -> ProviderSpec[Any]:
    """The spec of the provider with this name; LookupError if there is none."""
    try:
        return _known()[str(provider)]
    except KeyError:
        raise LookupError(f"no provider is called {str(provider)!r}") from None


def offered() -> list[ProviderSpec[Any]]:
    """The providers orders may name: every spec but those for tests, unless a test offers one."""
    return [
        spec for spec in _known().values() if not spec.for_tests or spec.name in _offered_for_tests
    ]


def offered_providers() -> list[Provider]:
    """The providers orders may name, in the registry's order."""
    return [spec.provider for spec in offered()]


def script_runners() -> frozenset[str]:
    """The providers whose creates can carry a start-up script (see `ProviderSpec`)."""
    return frozenset(spec.name for spec in _known().values() if spec.runs_startup_scripts)


def image_choosers() -> frozenset[str]:
    """The providers whose creates can name the image a machine boots (see `ProviderSpec`)."""
    return frozenset(spec.name for spec in _known().values() if spec.chooses_image)


def abilities() -> Abilities:
    """What each provider's creates can carry: start-up scripts, a chosen image."""
    return Abilities(script_runners=script_runners(), image_choosers=image_choosers())


def display_name(provider: str) -> str:
    """The provider's name as people write it."""
    return spec_for(provider).display_name


def vm_named(vm_id: str | None) -> str:
    """How a sentence names a machine: `VM 412001`, `cluster <Verda's id>`, or `cluster <name>`
    for nodes taken together; never by the composite ids the service keeps for clusters."""
    if vm_id is None:
        return "the VM"
    if (cluster_id := cluster_id_of(vm_id)) is not None:
        return f"cluster {cluster_id}"
    if is_assembled(vm_id):
        return f"cluster {vm_id.removeprefix(ASSEMBLED_PREFIX)}"
    return f"VM {vm_id}"


def described(exc: ProviderError) -> str:
    """A provider error as people read it: the provider's name, then what went wrong."""
    return f"{display_name(exc.provider)}: {exc.message}"


@contextmanager
def offering(*specs: ProviderSpec[Any]) -> Iterator[None]:
    """For tests: offer these specs (test-only ones, or ones not in `SPECS`) while inside."""
    added = {spec.name: spec for spec in specs if spec.name not in _offered_for_tests}
    _offered_for_tests.update(added)
    try:
        yield
    finally:
        for name in added:
            _offered_for_tests.pop(name, None)


def load_settings(given: Mapping[str, Any] | None) -> dict[str, ProviderSettings]:
    """Each registered provider's settings: as given (a model or its fields), else read from its
    `AUTOPROVISION_<NAME>_*` variables. Refusals are located as `providers.<name>.<field>`, so
    the variable can be named (`variable_name`)."""
    given = dict(given or {})
    loaded: dict[str, ProviderSettings] = {}
    errors: list[Any] = []
    for name, spec in _known().items():
        value = given.pop(name, None)
        try:
            if value is None:
                loaded[name] = spec.settings_model()
            elif isinstance(value, spec.settings_model):
                loaded[name] = value
            elif isinstance(value, Mapping):
                loaded[name] = spec.settings_model.model_validate(dict(value))
            else:
                errors.append(_refusal((name,), f"must be a {spec.settings_model.__name__}"))
        except ValidationError as exc:
            errors += [{**e, "loc": ("providers", name, *e["loc"])} for e in exc.errors()]
    if given:
        errors.append(_refusal((), f"no provider is called {', '.join(map(repr, sorted(given)))}"))
    if errors:
        raise ValidationError.from_exception_data("Settings", errors)
    return loaded


def _refusal(location: tuple[str, ...], message: str) -> Any:
    return {
        "type": "value_error",
        "loc": ("providers", *location),
        "input": None,
        "ctx": {"error": ValueError(message)},
    }


def with_provider_settings(settings: Settings, given: Mapping[str, Any] | None = None) -> Settings:
    """`settings` with every registered provider's settings loaded: those it holds, then those
    `given` (models or their fields), the rest read from `AUTOPROVISION_<NAME>_*` variables."""
    return settings.model_copy(
        update={"providers": load_settings({**settings.providers, **(given or {})})}
    )


def variable_name(location: tuple[int | str, ...]) -> str:
    """The environment variable a settings error's location names."""
    if len(location) >= 3 and location[0] == "providers" and str(location[1]) in _known():
        return str(_known()[str(location[1])].settings_model.env_name(str(location[2])))
    return "AUTOPROVISION_" + "_".join(str(part) for part in location).upper()


def configured_providers(settings: Settings) -> list[Provider]:
    """The offered providers the settings hold credentials for."""
    return [spec.provider for spec in offered() if spec.settings_of(settings).has_credentials()]


def enabled_providers(settings: Settings) -> list[Provider]:
    """The providers this service can deploy on: in demo mode the simulated ones (credentials
    are ignored there), in live mode those the settings hold credentials for."""
    if settings.mode == "demo":
        return [spec.provider for spec in simulated_specs()]
    return configured_providers(settings)


def build_adapters(settings: Settings, client: Connections) -> dict[Provider, ProviderAdapter]:
    """One adapter per offered provider with credentials, all sharing `client`."""
    timeouts = Timeouts(
        read=settings.provider_timeout_seconds, create=settings.provider_create_timeout_seconds
    )
    adapters: dict[Provider, ProviderAdapter] = {}
    for spec in offered():
        provider_settings = spec.settings_of(settings)
        if provider_settings.has_credentials():
            adapters[spec.provider] = spec.build_adapter(provider_settings, client, timeouts)
    return adapters


def poll_periods(settings: Settings) -> dict[Provider, float]:
    """Each provider's stock read period: set in its settings, or else planned."""
    return {spec.provider: spec.poll_period(settings) for spec in _known().values()}


def boot_deadlines(settings: Settings) -> dict[Provider, float]:
    """Seconds each provider's single machines have to run after their create was accepted."""
    return {
        spec.provider: spec.settings_of(settings).boot_deadline_minutes * 60
        for spec in _known().values()
    }


def planned_providers(settings: Settings) -> frozenset[Provider]:
    """The providers whose stock reads the poll budget plans (no period set)."""
    return frozenset(spec.provider for spec in _known().values() if spec.planned(settings))


def simulated(settings: Settings, root_url: str, **overrides: Any) -> Settings:
    """`settings` with every offered provider that has a simulator pointed at the simulators
    served at `root_url` (with the credentials they accept, and `overrides`)."""
    providers = dict(settings.providers)
    for spec in offered():
        if spec.simulator is not None:
            providers[spec.name] = spec.at_simulator(
                spec.settings_of(settings), root_url, **overrides
            )
    return settings.model_copy(update={"providers": providers})


def simulator_environment(root_url: str, **overrides: Any) -> dict[str, str]:
    """The `AUTOPROVISION_<NAME>_*` variables that point a service process at the simulators."""
    environment: dict[str, str] = {}
    for spec in offered():
        if spec.simulator is not None:
            environment.update(spec.simulator_environment(root_url, **overrides))
    return environment


def simulated_specs() -> list[ProviderSpec[Any]]:
    """The offered providers that have a simulator."""
    return [spec for spec in offered() if spec.simulator is not None]


def credentials_hint() -> str:
    """Which variables give credentials, for the message of a live mode without any."""
    options = [
        " and ".join(spec.settings_model.env_name(f) for f in spec.settings_model.credential_fields)
        for spec in offered()
        if spec.settings_model.credential_fields
    ]
    return options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1]
