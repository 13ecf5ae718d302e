"""Settings come from AUTOPROVISION_* variables and `.env`, with safe defaults."""

from decimal import Decimal
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from app.providers.registry import offered, spec_for, variable_name, with_provider_settings
from app.settings import GROUPS, Settings


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (
        "DATABASE_URL",
        "HOST",
        "PORT",
        "ADMIN_API_KEY",
        "FEE_PERCENT",
        "FEE_FLAT_PER_HOUR",
        "DB_POOL_SIZE",
        "DB_MAX_OVERFLOW",
        "DB_POOL_TIMEOUT_SECONDS",
        "MAX_REQUESTS_IN_FLIGHT",
    ):
        monkeypatch.delenv(f"AUTOPROVISION_{name}", raising=False)
    for variable in PROVIDER_DEFAULTS:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)


# Users, docker-compose.yml and tests/processes.py rely on these names and defaults.
PROVIDER_DEFAULTS = {
    "AUTOPROVISION_VERDA_BASE_URL": "https://api.verda.com/v1",
    "AUTOPROVISION_VERDA_CLIENT_ID": None,
    "AUTOPROVISION_VERDA_CLIENT_SECRET": None,
    "AUTOPROVISION_VERDA_IMAGE": "ubuntu-24.04-cuda-12.8-open-docker",
    "AUTOPROVISION_VERDA_CLUSTER_IMAGE": "ubuntu-24.04-cuda-13.0-cluster",
    "AUTOPROVISION_VERDA_POLL_SECONDS": 1.25,
    "AUTOPROVISION_VERDA_BOOT_DEADLINE_MINUTES": 20.0,
    "AUTOPROVISION_HYPERSTACK_BASE_URL": "https://infrahub-api.nexgencloud.com/v1",
    "AUTOPROVISION_HYPERSTACK_API_KEY": None,
    "AUTOPROVISION_HYPERSTACK_ENVIRONMENT": "autoprovision-{region}",
    "AUTOPROVISION_HYPERSTACK_KEY_NAME": "autoprovision",
    "AUTOPROVISION_HYPERSTACK_IMAGE": "Ubuntu Server 22.04 LTS R535 CUDA 12.2",
    "AUTOPROVISION_HYPERSTACK_POLL_SECONDS": 0.5,
    "AUTOPROVISION_HYPERSTACK_BOOT_DEADLINE_MINUTES": 20.0,
    "AUTOPROVISION_QUANTACLOUD_BASE_URL": "https://core.quantacloud.net/api/v1",
    "AUTOPROVISION_QUANTACLOUD_API_KEY": None,
    "AUTOPROVISION_QUANTACLOUD_POLL_SECONDS": 0.5,
    "AUTOPROVISION_QUANTACLOUD_BOOT_DEADLINE_MINUTES": 30.0,
}


def _provider_values(settings: Settings) -> dict[str, object]:
    values: dict[str, object] = {}
    for spec in offered():
        model = spec.settings_of(settings)
        for name in type(model).model_fields:
            value = getattr(model, name)
            secret = getattr(value, "get_secret_value", None)
            values[model.env_name(name)] = secret() if secret else value
    return values


def test_defaults_serve_locally_on_an_sqlite_file() -> None:
    settings = Settings()
    assert settings.database_url == "sqlite+aiosqlite:///./autoprovision.db"
    assert (settings.host, settings.port) == ("127.0.0.1", 8000)
    assert settings.admin_api_key is None
    assert settings.fee_percent == Decimal(0) and settings.fee_flat_per_hour == Decimal(0)


def test_environment_variables_use_the_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOPROVISION_PORT", "9000")
    monkeypatch.setenv("AUTOPROVISION_FEE_PERCENT", "7.5")
    settings = Settings()
    assert settings.port == 9000
    assert settings.fee_percent == Decimal("7.5")


def test_dotenv_file_is_read(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "AUTOPROVISION_FEE_FLAT_PER_HOUR=0.25\nAUTOPROVISION_HOST=0.0.0.0\n"
    )
    settings = Settings()
    assert settings.fee_flat_per_hour == Decimal("0.25")
    assert settings.host == "0.0.0.0"


def test_admin_key_is_a_secret_that_never_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOPROVISION_ADMIN_API_KEY", "a-very-secret-admin-key")
    settings = Settings()
    assert "a-very-secret-admin-key" not in repr(settings)
    assert "a-very-secret-admin-key" not in str(settings.model_dump())


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DATABASE_URL", "mysql://root@localhost/x"),
        ("ADMIN_API_KEY", "short"),
        ("FEE_PERCENT", "-1"),
        ("PORT", "70000"),
    ],
)
def test_bad_values_are_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(f"AUTOPROVISION_{name}", value)
    with pytest.raises(ValidationError):
        Settings()


def test_env_example_lists_every_setting() -> None:
    example = (Path(__file__).resolve().parent.parent / ".env.example").read_text()
    variables = [f"AUTOPROVISION_{name.upper()}" for name in Settings.model_fields]
    variables.remove("AUTOPROVISION_PROVIDERS")  # the providers' own, below
    variables += list(_provider_values(Settings()))
    missing = [name for name in variables if f"{name}=" not in example]
    assert missing == []


def test_provider_variables_keep_their_names_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _provider_values(with_provider_settings(Settings())) == PROVIDER_DEFAULTS
    changed = {
        "AUTOPROVISION_VERDA_CLIENT_ID": "id",
        "AUTOPROVISION_VERDA_CLIENT_SECRET": "secret",
        "AUTOPROVISION_HYPERSTACK_ENVIRONMENT": "one-env",
        "AUTOPROVISION_QUANTACLOUD_API_KEY": "qc-key",
        "AUTOPROVISION_QUANTACLOUD_POLL_SECONDS": "2",
        "AUTOPROVISION_HYPERSTACK_BOOT_DEADLINE_MINUTES": "45",
    }
    for variable, value in changed.items():
        monkeypatch.setenv(variable, value)
    read = _provider_values(with_provider_settings(Settings()))
    assert {k: str(read[k]) for k in changed} == {
        **changed,
        "AUTOPROVISION_QUANTACLOUD_POLL_SECONDS": "2.0",
        "AUTOPROVISION_HYPERSTACK_BOOT_DEADLINE_MINUTES": "45.0",
    }


def test_provider_variables_are_read_from_dotenv_too(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("AUTOPROVISION_HYPERSTACK_API_KEY=from-dotenv\n")
    settings = with_provider_settings(Settings())
    assert _provider_values(settings)["AUTOPROVISION_HYPERSTACK_API_KEY"] == "from-dotenv"
    assert "from-dotenv" not in repr(settings)


def test_a_bad_provider_setting_is_refused_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOPROVISION_VERDA_POLL_SECONDS", "0")
    with pytest.raises(ValidationError) as refused:
        with_provider_settings(Settings())
    (error,) = refused.value.errors()
    assert variable_name(error["loc"]) == "AUTOPROVISION_VERDA_POLL_SECONDS"


def test_settings_given_in_code_replace_the_environment_per_provider() -> None:
    settings = with_provider_settings(
        Settings(_env_file=None), {"hyperstack": {"api_key": "k", "poll_seconds": 3}}
    )
    hyperstack = spec_for("hyperstack").settings_of(settings)
    assert (hyperstack.poll_seconds, hyperstack.has_credentials()) == (3, True)
    assert not spec_for("verda").settings_of(settings).has_credentials()
    with pytest.raises(ValidationError, match="no provider is called 'aws'"):
        with_provider_settings(Settings(_env_file=None), {"aws": {}})


def test_pool_and_in_flight_limits_have_defaults_and_read_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    defaults = Settings()
    assert (defaults.db_pool_size, defaults.db_max_overflow) == (20, 10)
    assert defaults.db_pool_timeout_seconds == 10
    assert defaults.max_requests_in_flight == 16
    # an admitted request never needs to queue for a connection, background jobs included
    assert defaults.db_pool_size + defaults.db_max_overflow >= defaults.max_requests_in_flight + 8
    monkeypatch.setenv("AUTOPROVISION_DB_POOL_SIZE", "7")
    monkeypatch.setenv("AUTOPROVISION_DB_MAX_OVERFLOW", "0")
    monkeypatch.setenv("AUTOPROVISION_DB_POOL_TIMEOUT_SECONDS", "2.5")
    monkeypatch.setenv("AUTOPROVISION_MAX_REQUESTS_IN_FLIGHT", "5")
    settings = Settings()
    assert (settings.db_pool_size, settings.db_max_overflow) == (7, 0)
    assert settings.db_pool_timeout_seconds == 2.5
    assert settings.max_requests_in_flight == 5


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DB_POOL_SIZE", "0"),
        ("DB_MAX_OVERFLOW", "-1"),
        ("DB_POOL_TIMEOUT_SECONDS", "0"),
        ("MAX_REQUESTS_IN_FLIGHT", "0"),
        ("MAX_REQUESTS_IN_FLIGHT", "many"),
    ],
)
def test_bad_pool_and_in_flight_limits_are_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(f"AUTOPROVISION_{name}", value)
    with pytest.raises(ValidationError):
        Settings()


def test_every_setting_says_what_it_is_in_a_few_lines_and_sizing_is_in_the_guides() -> None:
    """The configuration reference is a table: a description is one or two sentences, and
    advice on sizing lives in docs/guides/sizing.md."""
    models: list[type[BaseModel]] = [Settings, *(spec.settings_model for spec in offered())]
    long = {
        f"{model.__name__}.{name}": len(field.description or "")
        for model in models
        for name, field in model.model_fields.items()
        if len(field.description or "") > 300
    }
    assert long == {}
    guide = Path(__file__).resolve().parent.parent / "docs" / "guides" / "sizing.md"
    assert "Pool plus overflow" in guide.read_text()


# One setting of each group, read from its flat variable as before settings came in groups.
ONE_OF_EACH_GROUP = {
    "AUTOPROVISION_PORT": ("port", "9001", 9001),
    "AUTOPROVISION_DB_POOL_SIZE": ("db_pool_size", "7", 7),
    "AUTOPROVISION_MAX_PLACEMENTS_PER_HOUR": ("max_placements_per_hour", "9", 9),
    "AUTOPROVISION_UNPAID_GRACE_MINUTES": ("unpaid_grace_minutes", "3", 3.0),
    "AUTOPROVISION_PROVIDER_TIMEOUT_SECONDS": ("provider_timeout_seconds", "4", 4.0),
    "AUTOPROVISION_WEBHOOK_TIMEOUT_SECONDS": ("webhook_timeout_seconds", "5", 5.0),
    "AUTOPROVISION_STREAM_MAX_PER_ACCOUNT": ("stream_max_per_account", "6", 6),
    "AUTOPROVISION_SIM_PORT": ("sim_port", "9002", 9002),
    "AUTOPROVISION_FOLLOW_SECONDS": ("follow_seconds", "2", 2.0),
}


def test_every_group_s_settings_keep_their_flat_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    groups_read = {
        group
        for group in GROUPS
        for name, _, _ in ONE_OF_EACH_GROUP.values()
        if name in group.model_fields
    }
    assert groups_read == set(GROUPS)  # the list below reaches into every group
    before = Settings()
    for variable, (_, value, _) in ONE_OF_EACH_GROUP.items():
        monkeypatch.setenv(variable, value)
    read = Settings()
    for name, _, expected in ONE_OF_EACH_GROUP.values():
        assert getattr(before, name) != expected  # control: the default is something else
        assert getattr(read, name) == expected


@pytest.mark.parametrize(
    ("values", "refused"),
    [
        ({"mode": "live", "public_url": "http://10.0.0.5:8000"}, True),
        (
            {"mode": "live", "public_url": "http://10.0.0.5:8000", "public_url_allow_http": True},
            False,
        ),
        ({"mode": "live", "public_url": "https://gpus.example.com"}, False),
        ({"mode": "demo", "public_url": "http://127.0.0.1:8000"}, False),
    ],
)
def test_live_mode_takes_a_plain_http_public_url_only_when_allowed(
    values: dict[str, object], refused: bool
) -> None:
    if refused:
        with pytest.raises(ValidationError, match="public_url must be https in live mode"):
            Settings.model_validate(values)
    else:
        assert Settings.model_validate(values).public_url is not None
