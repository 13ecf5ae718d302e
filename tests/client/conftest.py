"""The client commands run as the `autoprovision` command runs them (`app.cli.main`), against a
real service served on loopback (storage on SQLite, and on PostgreSQL when configured)."""

from collections.abc import Iterator

import pytest

from app.cli import main
from app.client.api import KEY_ENV, URL_ENV
from app.main import create_app
from app.settings import Settings
from tests.client.cli import Account, Autoprovision, Ran, create_account
from tests.servers import free_port, serve_in_thread


@pytest.fixture(autouse=True)
def no_client_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own service address and key never reach a test."""
    monkeypatch.delenv(URL_ENV, raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)


@pytest.fixture
def autoprovision(capsys: pytest.CaptureFixture[str]) -> Autoprovision:
    """Run `autoprovision ARGS...` in this process; what it did."""

    def run(*args: str) -> Ran:
        code = main(list(args))
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return run


@pytest.fixture
def service(settings: Settings) -> Iterator[str]:
    """The service (no watcher) on this test's database, on a loopback port; its URL."""
    with serve_in_thread(create_app(settings), lifespan="on") as url:
        yield url


@pytest.fixture
def account(service: str, monkeypatch: pytest.MonkeyPatch) -> Account:
    """An account with $100, whose URL and key the commands find in the environment."""
    handle = create_account(service)
    monkeypatch.setenv(URL_ENV, service)
    monkeypatch.setenv(KEY_ENV, handle.key)
    return handle


@pytest.fixture
def nowhere() -> str:
    """A loopback address where nothing listens."""
    return f"http://127.0.0.1:{free_port()}"
