"""The client commands run as the `autoprovision` command runs them (`app.cli.main`), against a
real service served on loopback (storage on SQLite, and on PostgreSQL when configured)."""

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from app.cli import main
from app.client.api import KEY_ENV, URL_ENV
from app.main import create_app
from app.settings import Settings
from tests.fixtures.settings import ADMIN_KEY
from tests.servers import free_port, serve_in_thread

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


@dataclass
class Ran:
    """What one command did: exit code, stdout, stderr."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        """Stdout as one JSON document."""
        return json.loads(self.out)

    def lines(self) -> list[str]:
        """Stdout's lines."""
        return self.out.splitlines()


Autoprovision = Callable[..., Ran]


class Background:
    """A command running in a thread of its own (a watch), while the test acts on the service."""

    def __init__(self, autoprovision: Autoprovision, *args: str) -> None:
        self.ran: Ran | None = None

        def run() -> None:
            self.ran = autoprovision(*args)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def result(self, seconds: float = 15) -> Ran:
        """What the command did, once it has exited."""
        self.thread.join(seconds)
        assert self.ran is not None, "the command did not exit"
        return self.ran


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


@dataclass
class Account:
    """An account on the service, with its key."""

    id: str
    key: str
    url: str

    @property
    def headers(self) -> dict[str, str]:
        """Headers that authenticate as this account."""
        return {"Authorization": f"Bearer {self.key}"}

    def orders(self) -> list[dict[str, Any]]:
        """Every order of the account, read through the API."""
        page = httpx.get(f"{self.url}/v1/orders?limit=100", headers=self.headers).json()
        found: list[dict[str, Any]] = page["data"]
        return found


def create_account(url: str, credit: str = "100") -> Account:
    """A new account on the service at `url`, topped up with `credit`."""
    created = httpx.post(f"{url}/v1/accounts", json={"name": "Ada"}, headers=ADMIN)
    assert created.status_code == 201, created.text
    account = Account(created.json()["id"], created.json()["api_key"], url)
    topped = httpx.post(
        f"{url}/v1/accounts/{account.id}/credits", json={"amount": credit}, headers=ADMIN
    )
    assert topped.status_code == 201, topped.text
    return account


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
