"""`autoprovision sim`: the simulators served over plain HTTP, or over TLS and a delaying relay
when asked to behave like a provider across a real network."""

import asyncio
import socket
import sys
import tempfile
from pathlib import Path

import uvicorn

from app.providers.registry import simulated_specs
from app.simulators.app import create_simulator_app
from app.simulators.network import Certificate, DelayRelay, Latency, self_signed


def _free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_simulators(
    host: str,
    port: int,
    log_level: str,
    *,
    latency: Latency | None = None,
    tls_dir: Path | None = None,
) -> None:
    """Serve every provider's simulator on host:port until interrupted. With `tls_dir`, over
    HTTPS with a certificate made now (written there); with `latency` (one way), behind a relay
    that delays every chunk by it in each direction, on loopback only."""
    certificate = self_signed(tls_dir) if tls_dir is not None else None
    scheme = "https" if certificate else "http"
    url = f"{scheme}://{host}:{port}"
    apis = ", ".join(spec.simulator.base_url(url) for spec in simulated_specs() if spec.simulator)
    notes = [f"  Provider simulators on {url}: {apis}", f"  Control API: {url}/<provider>/_sim/..."]
    if certificate:
        notes.append(
            f"  Certificate (trust it with AUTOPROVISION_PROVIDER_CA_FILE): {certificate.cert_file}"
        )
    if latency:
        notes.append(
            f"  Latency: {2 * latency.ms:g} ms round trip + up to {2 * latency.jitter_ms:g} ms"
        )
    sys.stdout.write("\n" + "\n".join(notes) + "\n\n")
    sys.stdout.flush()
    asyncio.run(_serve(host, port, log_level, latency, certificate))


async def _serve(
    host: str, port: int, log_level: str, latency: Latency | None, certificate: Certificate | None
) -> None:
    relay = None
    if latency is not None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise SystemExit("autoprovision sim: --latency-ms serves on loopback only")
        relay = DelayRelay(_free_loopback_port(), latency)
        await relay.start(host, port)
        host, port = "127.0.0.1", relay.target_port
    config = uvicorn.Config(
        create_simulator_app(),
        host=host,
        port=port,
        log_level=log_level,
        ssl_certfile=str(certificate.cert_file) if certificate else None,
        ssl_keyfile=str(certificate.key_file) if certificate else None,
    )
    try:
        await uvicorn.Server(config).serve()
    finally:
        if relay is not None:
            await relay.stop()
            sys.stdout.write(f"relay: {relay.connections} connections opened\n")
            sys.stdout.flush()


def default_tls_dir() -> Path:
    """Where `sim --tls` writes its certificate unless told: a new temporary directory."""
    return Path(tempfile.mkdtemp(prefix="autoprovision-sim-tls-"))
