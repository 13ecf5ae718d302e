"""The simulators across a real network: TLS trusted through a CA file (never by turning checks
off), a relay that delays every byte, and a provider that answers later than the others."""

import ssl
import time
from pathlib import Path

import httpx
import pytest

from app.providers.http import provider_tls
from app.settings import Settings
from app.simulators.app import create_simulator_app
from app.simulators.control import control_path
from app.simulators.network import DelayRelay, Latency, self_signed
from tests.servers import free_port, serve_in_thread

CONFIG = control_path("verda", "config")


def test_https_is_trusted_through_the_ca_file_and_only_so(tmp_path: Path) -> None:
    certificate = self_signed(tmp_path)
    with serve_in_thread(create_simulator_app(), certificate=certificate) as url:
        trusted = provider_tls(certificate.cert_file)
        assert isinstance(trusted, ssl.SSLContext)
        with httpx.Client(base_url=url, verify=trusted) as client:
            assert client.get(CONFIG).status_code == 200
        untrusted = httpx.Client(base_url=url, verify=provider_tls(None))  # the control
        with untrusted, pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            untrusted.get(CONFIG)
    assert provider_tls(None) is True


async def test_the_relay_delays_each_way_and_counts_connections() -> None:
    with serve_in_thread(create_simulator_app()) as url:
        target = int(url.rsplit(":", 1)[1])
        port = free_port()
        relay = DelayRelay(target, Latency(60))
        await relay.start("127.0.0.1", port)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                started = time.monotonic()
                assert (await client.get(CONFIG)).status_code == 200
                first = time.monotonic() - started
                started = time.monotonic()
                assert (await client.get(CONFIG)).status_code == 200
                second = time.monotonic() - started
        finally:
            await relay.stop()
    # A request and its answer each cross the relay once: a round trip is 120 ms at least.
    assert first >= 0.12 and second >= 0.12
    assert relay.connections == 1  # the second request went over the same, kept-alive one


async def test_a_provider_can_answer_later_than_the_others() -> None:
    app = create_simulator_app()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://sim") as client:
        refused = await client.put(CONFIG, json={"latency_ms": -1})
        assert refused.status_code == 422
        shown = await client.put(CONFIG, json={"latency_ms": 80, "jitter_ms": 10})
        assert (shown.json()["latency_ms"], shown.json()["jitter_ms"]) == (80, 10)
        started = time.monotonic()
        await client.get("/verda/v1/instance-types")
        slow = time.monotonic() - started
        other = (await client.get(control_path("hyperstack", "config"))).json()
    assert slow >= 0.08
    assert (other["latency_ms"], other["jitter_ms"]) == (0, 0)  # set per provider


def test_tls_simulators_are_started_apart() -> None:
    with pytest.raises(ValueError, match="sim_tls needs sim_embedded=false"):
        Settings(_env_file=None, sim_tls=True)
    settings = Settings(_env_file=None, sim_tls=True, sim_embedded=False, sim_port=9443)
    assert settings.sim_url == "https://127.0.0.1:9443"
