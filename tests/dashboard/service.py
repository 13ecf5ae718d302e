"""The service on a port of its own and its REST API, for the browser tests (their fixtures are
in conftest.py); and where their screenshots go."""

import contextlib
from pathlib import Path
from typing import Any

import httpx

from app.main import create_app
from app.settings import Settings
from tests.fixtures.settings import ADMIN_KEY
from tests.servers import free_port, serve_in_thread

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


class Service:
    """The service on a port of its own, which a test may stop and start again there."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.port = free_port()
        self._running: contextlib.ExitStack | None = None

    def start(self) -> str:
        """Serve (a new process's worth of app) on the port; the URL."""
        self._running = contextlib.ExitStack()
        app = create_app(self.settings)
        return self._running.enter_context(serve_in_thread(app, lifespan="on", port=self.port))

    def stop(self) -> None:
        """Stop serving: connections are closed, the port refuses."""
        if self._running is not None:
            self._running.close()
            self._running = None


class Api:
    """The REST API as an admin and as the test's account, to set up and check things."""

    def __init__(self, url: str, credit: str = "100") -> None:
        self.client = httpx.Client(base_url=url, timeout=10)
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        created = self.client.post("/v1/accounts", json={"name": "Grace"}, headers=admin)
        assert created.status_code == 201, created.text
        self.account_id = created.json()["id"]
        self.key = created.json()["api_key"]
        self.headers = {"Authorization": f"Bearer {self.key}"}
        topped = self.client.post(
            f"/v1/accounts/{self.account_id}/credits", json={"amount": credit}, headers=admin
        )
        assert topped.status_code == 201, topped.text

    def place(self, **body: Any) -> dict[str, Any]:
        answer = self.client.post("/v1/orders", json=body, headers=self.headers)
        assert answer.status_code == 201, answer.text
        order: dict[str, Any] = answer.json()
        return order

    def order(self, order_id: str) -> dict[str, Any]:
        order: dict[str, Any] = self.client.get(
            f"/v1/orders/{order_id}", headers=self.headers
        ).json()
        return order
