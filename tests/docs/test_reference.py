"""The reference pages under docs/reference/ are what the code says now: regenerated here and
compared with the committed files, so a setting, a command, an endpoint or a state added to the
code without `make reference` fails this test (and `make docs`)."""

from typing import Any, ClassVar

import pytest
import typer
from pydantic import Field

import app.cli
import app.settings
from app.core.states import mermaid
from app.providers.registry import offered
from app.settings import Settings, SettingsGroup
from scripts import gen_reference
from scripts.gen_reference import (
    REFERENCE,
    ReferenceError,
    _transition_tables,
    command_names,
    stale,
)


def test_the_committed_reference_pages_are_what_the_code_says() -> None:
    assert stale() == [], "run `make reference` and commit what it wrote"


def test_every_setting_is_in_the_configuration_page_with_its_meaning() -> None:
    page = (REFERENCE / "configuration.md").read_text()
    for name, field in Settings.model_fields.items():
        if name == "providers":  # each provider's own, below
            continue
        assert field.description, f"Settings.{name} needs Field(description=...)"
        assert f"| `AUTOPROVISION_{name.upper()}` |" in page
    for spec in offered():
        for name in spec.settings_model.model_fields:
            assert f"| `{spec.settings_model.env_name(name)}` |" in page


def test_every_command_is_in_the_cli_page() -> None:
    page = (REFERENCE / "cli.md").read_text()
    names = command_names()
    assert {"serve", "doctor", "orders place", "watch"} <= set(names)  # both trees were read
    for name in names:
        assert f"### autoprovision {name}\n" in page


def test_the_states_page_shows_every_transition_table() -> None:
    page = (REFERENCE / "states.md").read_text()
    tables = _transition_tables()
    assert len(tables) == 2  # orders and their create attempts
    for _states, table in tables:
        assert f"```mermaid\n{mermaid(table)}\n```" in page


class _NewGroup(SettingsGroup):
    """Settings of something new."""

    title: ClassVar[str] = "Something new"
    a_new_setting: int = Field(default=3, description="Something new.")


class _UndescribedGroup(SettingsGroup):
    title: ClassVar[str] = "Something new"
    a_new_setting: int = 3


class _WithOneMore(_NewGroup, Settings):
    pass


class _WithoutDescription(_UndescribedGroup, Settings):
    pass


class _WithOneLoose(Settings):
    a_new_setting: int = Field(default=3, description="Something new.")


def test_a_setting_added_without_make_reference_makes_the_page_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(app.settings, "Settings", _WithOneMore)
    monkeypatch.setattr(app.settings, "GROUPS", (*app.settings.GROUPS, _NewGroup))
    assert stale() == [".env.example", "docs/reference/configuration.md"]
    assert "| `AUTOPROVISION_A_NEW_SETTING` | `3` | Something new. |" in (
        gen_reference.configuration()
    )


def test_a_setting_without_a_description_stops_the_generator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(app.settings, "Settings", _WithoutDescription)
    monkeypatch.setattr(app.settings, "GROUPS", (*app.settings.GROUPS, _UndescribedGroup))
    with pytest.raises(ReferenceError, match="a_new_setting has no description"):
        gen_reference.configuration()


def test_a_setting_in_no_group_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page lists the groups' fields: one outside them would be left out without a word."""
    monkeypatch.setattr(app.settings, "Settings", _WithOneLoose)
    with pytest.raises(ReferenceError, match="a_new_setting is in no group"):
        gen_reference.configuration()
    monkeypatch.setattr(app.settings, "GROUPS", (*app.settings.GROUPS, _NewGroup))
    assert "`AUTOPROVISION_A_NEW_SETTING`" in gen_reference.configuration()  # control: grouped


def test_a_command_added_without_make_reference_makes_the_page_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cli = typer.Typer()
    cli.registered_commands.extend(app.cli.cli.registered_commands)
    cli.registered_groups.extend(app.cli.cli.registered_groups)

    @cli.command("new-thing")
    def new_thing() -> None:
        """Does something new."""

    monkeypatch.setattr(app.cli, "cli", cli)
    assert "new-thing" in command_names()
    assert stale() == ["docs/reference/cli.md"]


def test_an_error_code_without_a_sentence_stops_the_generator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    when: dict[str, Any] = dict(gen_reference.WHEN)
    del when["order_busy"]
    monkeypatch.setattr(gen_reference, "WHEN", when)
    with pytest.raises(ReferenceError, match="order_busy"):
        gen_reference.errors()


def test_the_watcher_s_inner_timing_is_listed_apart_after_the_rest() -> None:
    page = gen_reference.configuration()
    main, advanced = page.split("### Advanced: the watcher's inner timing")
    assert "`AUTOPROVISION_FOLLOW_SECONDS`" in advanced
    assert "`AUTOPROVISION_FOLLOW_SECONDS`" not in main
    assert "`AUTOPROVISION_PORT`" in main  # control: an operator's setting stays first
