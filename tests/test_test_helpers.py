"""The tests' own layout: helpers live in helper modules, never in another test or a conftest."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workers import WORKERS_ENV, auto_workers

TESTS = Path(__file__).resolve().parent


def borrowed_imports(source: str) -> list[str]:
    """Modules of `tests` that `source` imports although they are tests or conftests."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "tests" and any(
                p.startswith("test_") or p == "conftest" for p in parts[1:]
            ):
                found.append(name)
                break
    return found


def test_no_test_module_imports_another_test_module_or_a_conftest() -> None:
    offenders = {
        str(path.relative_to(TESTS)): borrowed
        for path in sorted(TESTS.rglob("*.py"))
        if (borrowed := borrowed_imports(path.read_text()))
    }
    assert offenders == {}


def test_the_check_finds_a_borrowed_fixture() -> None:
    """Positive control: imports from a test module or a conftest are found, helpers are not."""
    assert borrowed_imports("from tests.watcher.conftest import live_settings") == [
        "tests.watcher.conftest"
    ]
    assert borrowed_imports("from tests.api import test_orders") == ["tests.api.test_orders"]
    assert borrowed_imports("from tests.waiting import eventually\nimport tests.clock") == []


def _collected(marker: str, *paths: str) -> set[str]:
    """The modules of `paths` with a test that `-m marker` selects."""
    collect = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    listed = subprocess.run(
        [*collect, "-m", marker, *paths],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return {line.split("::")[0] for line in listed.splitlines() if "::" in line}


@pytest.mark.slow  # two pytest processes of its own, collecting
def test_browser_tests_are_slow_and_api_tests_are_not() -> None:
    browser, api = "tests/dashboard/test_browser.py", "tests/api/routes/test_health.py"
    assert _collected("slow", browser, api) == {browser}
    assert _collected("not slow", browser, api) == {api}  # control: both are collected


def test_auto_starts_a_worker_more_than_cores_unless_xdist_is_told_how_many() -> None:
    assert auto_workers(2, {}) == 3
    assert auto_workers(0, {}) == 2  # a count that could not be read still runs
    assert auto_workers(2, {WORKERS_ENV: "5"}) is None  # xdist's own count: its variable's 5
