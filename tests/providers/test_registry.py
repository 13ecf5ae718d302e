"""The list of provider specs and what is derived from it."""

import re
from pathlib import Path

from app.background import LIVE_WITHOUT_CREDENTIALS
from app.providers.registry import SPECS, offered, simulated, simulator_environment
from app.settings import Settings
from app.simulators.app import create_simulator_app

PROVIDERS = Path(__file__).resolve().parents[2] / "app" / "providers"
STATUS_CHECK = re.compile(r"status(_code)?\s*(==|!=|<|>|in\b|not in\b)|\.json\(|is_success")


def test_the_planned_periods_spend_more_of_the_limits_and_stay_within_them() -> None:
    fixed_before = {"verda": 1.25, "hyperstack": 0.5, "quantacloud": 0.5}  # the defaults
    for spec in SPECS:
        if spec.for_tests:
            continue
        period = spec.planned_period()
        assert spec.poll_period(Settings(_env_file=None)) == period  # planned by default
        assert (
            spec.poll_period(Settings(_env_file=None, poll_plan=False)) == (fixed_before[spec.name])
        )
        for limit in spec.rate_limits:
            counted = sum(1 for request in spec.stock_read if limit.bucket(*request) is not None)
            reads = counted * limit.seconds / period
            assert reads <= limit.requests - 2, f"{spec.name}: {reads:.0f} > {limit}"
        assert period < fixed_before[spec.name]


def test_every_provider_with_a_wire_api_has_a_client_a_parser_and_an_adapter() -> None:
    wired = [spec for spec in SPECS if spec.simulator is not None]
    assert [spec.name for spec in wired] == ["verda", "hyperstack", "quantacloud"]
    for spec in wired:
        package = PROVIDERS / spec.name
        assert {"client.py", "parse.py", "adapter.py"} <= {p.name for p in package.iterdir()}
        adapter = (package / "adapter.py").read_text()
        assert not STATUS_CHECK.search(adapter), f"{spec.name}: the adapter reads HTTP answers"


def test_the_simulators_are_mounted_where_the_specs_say() -> None:
    app = create_simulator_app()
    mounted = {route.path for route in app.routes}  # type: ignore[attr-defined]
    assert mounted == {spec.simulator.path for spec in SPECS if spec.simulator}
    assert set(app.state.simulators) == {spec.name for spec in SPECS if spec.simulator}


def test_settings_and_processes_are_pointed_at_the_simulators_from_the_specs() -> None:
    settings = simulated(Settings(_env_file=None), "http://127.0.0.1:8001", poll_seconds=0.2)
    for spec in offered():
        if spec.simulator is None:
            continue
        ours = spec.settings_of(settings)
        assert ours.has_credentials() and ours.poll_seconds == 0.2
        assert ours.base_url == spec.simulator.base_url("http://127.0.0.1:8001")
    environment = simulator_environment("http://127.0.0.1:8001")
    assert environment["AUTOPROVISION_VERDA_BASE_URL"] == "http://127.0.0.1:8001/verda/v1"
    assert environment["AUTOPROVISION_QUANTACLOUD_BASE_URL"] == (
        "http://127.0.0.1:8001/quantacloud/api/v1"
    )
    assert environment["AUTOPROVISION_VERDA_CLIENT_ID"] == "sim-client"
    assert environment["AUTOPROVISION_HYPERSTACK_API_KEY"] == "sim-key"


def test_live_mode_without_credentials_says_which_variables_give_them() -> None:
    for variable in (
        "AUTOPROVISION_VERDA_CLIENT_ID and AUTOPROVISION_VERDA_CLIENT_SECRET",
        "AUTOPROVISION_HYPERSTACK_API_KEY",
        "AUTOPROVISION_QUANTACLOUD_API_KEY",
    ):
        assert variable in LIVE_WITHOUT_CREDENTIALS
    assert "FAKE" not in LIVE_WITHOUT_CREDENTIALS
