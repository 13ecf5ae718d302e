"""The Makefile: `make run` installs the runtime only; `make test` and `make lint` add the dev
extra to the same .venv. Read with `make -n` in a copy without a .venv (nothing is installed)."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _planned(target: str, workdir: Path, *variables: str) -> str:
    """The commands `make TARGET` would run in `workdir` (a copy of the Makefile)."""
    return subprocess.run(
        ["make", "--no-print-directory", "-n", target, *variables],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """The Makefile and pyproject.toml in a directory of their own, with no .venv yet."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_make_run_installs_the_runtime_dependencies_only(clone: Path) -> None:
    planned = _planned("run", clone)
    assert "-m venv .venv" in planned
    assert "pip install --quiet -e .\n" in planned
    assert "[dev]" not in planned
    assert planned.rstrip().endswith(".venv/bin/autoprovision serve")


@pytest.mark.parametrize("target", ["test", "lint"])
def test_make_test_and_lint_add_the_dev_extra_to_the_same_venv(clone: Path, target: str) -> None:
    planned = _planned(target, clone)
    assert "-m venv .venv" in planned
    assert "pip install --quiet -e '.[dev]'" in planned


def test_make_test_after_make_run_adds_the_dev_extra(clone: Path) -> None:
    venv = clone / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch(mode=0o755)
    (venv / ".runtime-stamp").touch()  # as `make run` leaves it
    assert "pip install" not in _planned("run", clone)  # control: run has what it needs
    planned = _planned("test", clone)
    assert "-m venv" not in planned
    assert "pip install --quiet -e '.[dev]'" in planned


def test_make_docs_serve_takes_a_port(clone: Path) -> None:
    assert _planned("docs-serve", clone).rstrip().endswith("--dev-addr 127.0.0.1:8008")
    moved = _planned("docs-serve", clone, "DOCS_PORT=8123")
    assert moved.rstrip().endswith("--dev-addr 127.0.0.1:8123")


def test_make_test_fast_leaves_out_the_slow_tests_and_both_use_every_core(clone: Path) -> None:
    fast = _planned("test-fast", clone).rstrip().splitlines()[-1]
    whole = _planned("test", clone).rstrip().splitlines()[-1]
    assert "-n auto" in fast and '-m "not slow"' in fast
    assert "-n auto" in whole and "not slow" not in whole
