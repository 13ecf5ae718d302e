"""The service, watcher running, against the three simulators served on a real socket."""

from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from app.catalogue import Provider
from app.settings import Settings
from app.simulators.app import create_simulator_app
from tests.conftest import ADMIN_KEY, SECRET_KEY
from tests.servers import serve_in_thread

BOOT_SECONDS = 0.3


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    """The simulators, shared by the tests of a module (reset before each test)."""
    with serve_in_thread(create_simulator_app()) as url:
        yield url


class Sim:
    """The simulators' control API, as tests, benchmarks and the demo use it."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def stock(self, provider: str, sku: str, region: str, quantity: int) -> float:
        """Set stock; returns when it changed (Unix seconds)."""
        body = {"sku": sku, "region": region, "quantity": quantity}
        response = await self.client.put(f"/{provider}/_sim/stock", json=body)
        assert response.status_code == 200, response.text
        changed_at: float = response.json()["changed_at"]
        return changed_at

    async def fault(self, provider: str, kind: str, **extra: Any) -> None:
        """Queue a fault."""
        body = {"kind": kind, **extra}
        response = await self.client.post(f"/{provider}/_sim/faults", json=body)
        assert response.status_code == 201, response.text

    async def creates(self, provider: str) -> list[dict[str, Any]]:
        """Every create the simulator received."""
        result: list[dict[str, Any]] = (await self.client.get(f"/{provider}/_sim/creates")).json()
        return result

    async def vms(self, provider: str) -> list[dict[str, Any]]:
        """The VMs that exist at the simulator."""
        result: list[dict[str, Any]] = (await self.client.get(f"/{provider}/_sim/vms")).json()
        return result

    async def config(self, provider: str, **values: Any) -> None:
        """Change a simulator's settings."""
        response = await self.client.put(f"/{provider}/_sim/config", json=values)
        assert response.status_code == 200, response.text


@pytest.fixture
async def sim(sim_url: str) -> AsyncIterator[Sim]:
    """The simulators, reset, with quick boots."""
    async with httpx.AsyncClient(base_url=sim_url, timeout=10) as client:
        for provider in Provider:
            await client.post(f"/{provider}/_sim/reset")
            await client.put(f"/{provider}/_sim/config", json={"boot_seconds": BOOT_SECONDS})
        yield Sim(client)


@pytest.fixture
def settings(database_url: str, sim_url: str, sim: Sim) -> Settings:
    """Live mode pointed at the simulators, with everything tuned to be quick."""
    return live_settings(database_url, sim_url)


def live_settings(database_url: str, sim_url: str) -> Settings:
    """Live mode pointed at the simulators at `sim_url`, with everything tuned to be quick."""
    return Settings(
        _env_file=None,
        database_url=database_url,
        admin_api_key=ADMIN_KEY,
        secret_key=SECRET_KEY,
        mode="live",
        watcher=True,
        fee_percent=Decimal("5"),
        fee_flat_per_hour=Decimal("0.10"),
        verda_base_url=f"{sim_url}/verda/v1",
        verda_client_id="sim-client",
        verda_client_secret="sim-secret",
        hyperstack_base_url=f"{sim_url}/hyperstack/v1",
        hyperstack_api_key="sim-key",
        quantacloud_base_url=f"{sim_url}/quantacloud/api/v1",
        quantacloud_api_key="sim-key",
        verda_poll_seconds=0.1,
        hyperstack_poll_seconds=0.1,
        quantacloud_poll_seconds=0.1,
        follow_seconds=0.1,
        outcome_check_seconds=0.3,
        waiting_refresh_seconds=0.1,
        capacity_cooldown_seconds=0.5,
        provider_timeout_seconds=2,
        provider_create_timeout_seconds=1,
    )
