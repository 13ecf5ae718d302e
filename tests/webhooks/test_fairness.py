"""One account's receivers that accept and never answer hold up only that account's share of
the dispatcher: another account's delivery still goes out at once."""

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.factories import AccountHandle, create_account
from tests.waiting import eventually
from tests.webhooks.endpoints import add_endpoint, arrived, cancelled_order, deliveries
from tests.webhooks.receiver import Receiver

TARPIT_ACCOUNTS = 4
ENDPOINTS_PER_ACCOUNT = 20  # the most an account may have
PER_ACCOUNT = 4  # the default webhook_max_in_flight_per_account


class Tarpit:
    """A loopback TCP server that accepts every connection, reads, and never answers."""

    def __init__(self) -> None:
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []
        self.url = ""

    async def start(self) -> None:
        """Listen on 127.0.0.1, on a port of the system's choosing."""
        self.server = await asyncio.start_server(self._hold, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    async def _hold(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        while await reader.read(65536):  # until the sender gives up and closes
            pass

    @property
    def open_connections(self) -> int:
        """Connections accepted and not yet closed by the other side."""
        return sum(1 for w in self.writers if not w.is_closing())

    async def close(self) -> None:
        """Drop every connection and stop listening."""
        for writer in self.writers:
            writer.close()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


@pytest.fixture
async def tarpit() -> AsyncIterator[Tarpit]:
    pit = Tarpit()
    await pit.start()
    try:
        yield pit
    finally:
        await pit.close()


async def _tarpit_accounts(client: httpx.AsyncClient, tarpit: Tarpit) -> list[AccountHandle]:
    accounts = []
    for a in range(TARPIT_ACCOUNTS):
        account = await create_account(client)
        for e in range(ENDPOINTS_PER_ACCOUNT):
            await add_endpoint(client, account, f"{tarpit.url}/a{a}/e{e}")
        accounts.append(account)
    for account in accounts:  # each event goes to the account's 20 endpoints
        await cancelled_order(client, account)
    return accounts


class TestTarpits:
    @pytest.fixture
    def settings(self, settings: Settings) -> Settings:
        """Timeouts far beyond the test: the tarpits hold their sends throughout."""
        return settings.model_copy(
            update={
                "webhook_timeout_seconds": 60.0,
                "webhook_first_byte_timeout_seconds": 60.0,
                "webhook_poll_seconds": 0.1,
            }
        )

    async def test_another_accounts_delivery_arrives_within_a_second(
        self, client: httpx.AsyncClient, receiver: Receiver, tarpit: Tarpit, app: Any
    ) -> None:
        accounts = await _tarpit_accounts(client, tarpit)

        async def held() -> int | None:
            count = tarpit.open_connections
            return count if count >= TARPIT_ACCOUNTS * PER_ACCOUNT else None

        await eventually(held, seconds=10)
        healthy = await create_account(client)
        await add_endpoint(client, healthy, f"{receiver.url}/healthy")
        await cancelled_order(client, healthy)
        (request,) = await arrived(receiver, "/healthy", 1, seconds=30)
        created = datetime.fromisoformat(json.loads(request.body)["timestamp"])
        assert request.at - created.timestamp() < 1.0

        # Control: the tarpits really hold their sends - each account its share, no more,
        # and not one of those deliveries has an attempt recorded.
        assert tarpit.open_connections == TARPIT_ACCOUNTS * PER_ACCOUNT
        for account in accounts:
            listed = await client.get("/v1/webhook-endpoints?limit=100", headers=account.headers)
            endpoints = listed.json()["data"]
            assert len(endpoints) == ENDPOINTS_PER_ACCOUNT
            for endpoint in endpoints[:3]:
                (delivery,) = await deliveries(client, account, endpoint["id"])
                assert (delivery["status"], delivery["attempts"]) == ("pending", [])
        await tarpit.close()  # frees the sends before the app stops


class TestFirstByteTimeout:
    @pytest.fixture
    def settings(self, settings: Settings) -> Settings:
        return settings.model_copy(
            update={"webhook_timeout_seconds": 60.0, "webhook_first_byte_timeout_seconds": 0.5}
        )

    async def test_a_receiver_that_never_answers_is_given_up_on_at_the_first_byte_timeout(
        self, client: httpx.AsyncClient, tarpit: Tarpit
    ) -> None:
        account = await create_account(client)
        endpoint = await add_endpoint(client, account, f"{tarpit.url}/hook")
        await cancelled_order(client, account)

        async def attempted() -> dict[str, Any] | None:
            found = await deliveries(client, account, endpoint["id"])
            return found[0]["attempts"][0] if found and found[0]["attempts"] else None

        attempt = await eventually(attempted, seconds=10)
        assert attempt["status_code"] is None
        assert attempt["error"] == "no answer within 0.5 s"
        assert attempt["duration_ms"] < 5_000  # the overall timeout is 60 s
