"""The `autoprovision` command run in this process, what it did, and an account on the service
it talks to, for the client tests (their fixtures are in conftest.py)."""

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from tests.factories import ADMIN


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


# `orders place` arguments: 8x B300 at Verda or Hyperstack, up to $45.50 an hour.
B300 = ("-g", "b300", "-n", "8", "-p", "verda", "-p", "hyperstack", "--max-price", "45.5")


def place(autoprovision: Autoprovision, *extra: str) -> str:
    """Place an 8x B300 order; its id."""
    ran = autoprovision("orders", "place", *B300, *extra, "--json")
    assert ran.code == 0, ran.err
    order_id: str = ran.json()["id"]
    return order_id
