"""A real network in front of the simulators: TLS with a certificate made at start, and a
loopback TCP relay that delays every chunk by a one-way latency in each direction.

Delaying bytes, not answers, is what makes a handshake cost what it costs over a real network:
a TLS handshake's round trips cross the relay like any request. (The TCP handshake itself is
between the client and the relay, on loopback: a new connection's SYN round trip is not
delayed, so the relay understates a cold connection's cost by one round trip.)
"""

import asyncio
import contextlib
import datetime
import ipaddress
import random
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CHUNK = 65_536


@dataclass(frozen=True)
class Certificate:
    """A self-signed certificate for 127.0.0.1 and localhost: its PEM file is also the CA file
    a client trusts it by (`AUTOPROVISION_PROVIDER_CA_FILE`)."""

    cert_file: Path
    key_file: Path


def self_signed(directory: Path, *, days: int = 7) -> Certificate:
    """Write a new self-signed certificate and its key into `directory`."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "autoprovision simulators")])
    now = datetime.datetime.now(datetime.UTC)
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = directory / "sim-cert.pem", directory / "sim-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_file.chmod(0o600)
    return Certificate(cert_file, key_file)


@dataclass(frozen=True)
class Latency:
    """A one-way delay: `ms`, plus up to `jitter_ms` more, drawn per chunk (order is kept)."""

    ms: float
    jitter_ms: float = 0.0

    def draw(self, rng: random.Random) -> float:
        """One chunk's delay in seconds."""
        return (self.ms + rng.uniform(0, self.jitter_ms)) / 1000


class DelayRelay:
    """Listens on a loopback port and relays each connection to `target_port`, holding every
    chunk `latency` before passing it on, in both directions. Counts connections, so a
    benchmark can tell whether a request opened a new one."""

    def __init__(self, target_port: int, latency: Latency, *, seed: int | None = None) -> None:
        self.target_port = target_port
        self.latency = latency
        self.connections = 0
        self._rng = random.Random(seed)
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> None:
        """Start listening on host:port."""
        self._server = await asyncio.start_server(self._relay, host, port)

    async def stop(self) -> None:
        """Stop listening and drop the connections being relayed."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _relay(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        self.connections += 1
        try:
            server_in, server_out = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            client_out.close()
            return
        await asyncio.gather(self._pipe(client_in, server_out), self._pipe(server_in, client_out))

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        """Copy source to sink, each chunk delivered `latency` after it was read: a queue keeps
        chunks in order while later ones are already on their way."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        async def deliver() -> None:
            due_last = 0.0
            while True:
                due, chunk = await queue.get()
                due = max(due, due_last)  # jitter never reorders bytes
                due_last = due
                await asyncio.sleep(max(0.0, due - loop.time()))
                if not chunk:
                    break
                sink.write(chunk)
                await sink.drain()

        delivery = asyncio.create_task(deliver())
        try:
            while True:
                chunk = await source.read(CHUNK)
                queue.put_nowait((loop.time() + self.latency.draw(self._rng), chunk))
                if not chunk:
                    break
            await delivery
        except (ConnectionError, asyncio.IncompleteReadError):
            delivery.cancel()
        finally:
            if sink.can_write_eof():
                with contextlib.suppress(OSError, RuntimeError):
                    sink.write_eof()
            sink.close()
