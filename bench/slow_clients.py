"""Does the API still answer while slow clients hold connections? Latency of a plain read.

Starts the service (`autoprovision serve`, API only, on a fresh SQLite file) and times
REQUESTS reads of `GET /v1/catalogue` from 127.0.0.1, one after another on one kept-alive
connection, in each of these phases (the stalled connections come from other loopback
addresses, 127.0.0.2-127.0.0.9, as an attacker's would, and stay open for the whole phase):

- quiet: nothing else;
- 16 stalled bodies: `POST /v1/orders` saying `Content-Length: 1000` and sending one byte,
  each held once the service has asked for the body (`100 Continue`): the attack that made
  every request a `503 overloaded` before bodies were read ahead of the in-flight bound;
- 200 stalled: 100 such bodies and 100 request heads that never end;
- 16 slow readers: 128 pipelined `GET /openapi.json` on a connection with a 4 KiB receive
  buffer that is never read, so the later answers cannot be written at all.

Figures per phase: median, p99 and max in ms, and how many reads were not a 200.

    .venv/bin/python bench/slow_clients.py [--requests 200] [--json bench/results/slow_clients.json]
"""

import argparse
import json
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from common import free_port, git_revision, service_env, start, stop

ADMIN_KEY = "bench-admin-key-0123456789"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
PIPELINED = 128  # answers asked for at once on each slow reader's connection


def head(method: str, path: str, **headers: str) -> bytes:
    """A request head."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def stalled_body(port: int, source: str, api_key: str) -> socket.socket:
    """A POST whose body stops after one byte, once the service asked for the body."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    sock.sendall(
        head(
            "POST",
            "/v1/orders",
            Authorization=f"Bearer {api_key}",
            **{"Content-Type": "application/json", "Content-Length": "1000"},
            Expect="100-continue",
        )
    )
    sock.recv(64)  # 100 Continue
    sock.sendall(b"{")
    return sock


def stalled_head(port: int, source: str) -> socket.socket:
    """A request head that never ends."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    sock.sendall(b"GET /v1/catalogue HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    return sock


def slow_reader(port: int, source: str) -> socket.socket:
    """PIPELINED requests for a large answer, on a connection that is never read."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    sock.sendall(head("GET", "/openapi.json") * PIPELINED)
    return sock


def timed_reads(api: httpx.Client, requests: int) -> dict[str, Any]:
    """`requests` reads of the catalogue: median, p99, max (ms) and the answers not 200."""
    took: list[float] = []
    failed = 0
    for _ in range(requests):
        started = time.perf_counter()
        try:
            failed += api.get("/v1/catalogue").status_code != 200
        except httpx.HTTPError:
            failed += 1
        took.append(time.perf_counter() - started)
    ordered = sorted(took)
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
        "not_200": failed,
    }


def phases(port: int, api_key: str) -> dict[str, Callable[[], list[socket.socket]]]:
    """Each phase's name and how to open its stalled connections."""

    def source(n: int, first: int) -> str:
        return f"127.0.0.{first + n % 4}"

    return {
        "quiet": list,
        "16 stalled bodies": lambda: [stalled_body(port, "127.0.0.2", api_key) for _ in range(16)],
        "200 stalled": lambda: (
            [stalled_body(port, source(n, 2), api_key) for n in range(100)]
            + [stalled_head(port, source(n, 6)) for n in range(100)]
        ),
        "16 slow readers": lambda: [slow_reader(port, "127.0.0.2") for _ in range(16)],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the service and time every phase."""
    results: dict[str, Any] = {"revision": git_revision(), "requests": args.requests}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        port = free_port()
        env = service_env(
            f"sqlite+aiosqlite:///{workdir / 'bench.db'}",
            ADMIN_KEY,
            free_port(),
            port,
            AUTOPROVISION_WATCHER="false",
            # Longer than a phase, so nothing stalled is let go while it is timed.
            AUTOPROVISION_REQUEST_TIMEOUT_SECONDS="60",
            AUTOPROVISION_RESPONSE_TIMEOUT_SECONDS="60",
        )
        process = start([sys.executable, "-m", "app", "serve"], env, workdir / "service.log")
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as api:
                for _ in range(600):
                    try:
                        api.get("/healthz")
                        break
                    except httpx.TransportError:
                        time.sleep(0.1)
                made = api.post("/v1/accounts", json={"name": "bench"}, headers=ADMIN).json()
                timed_reads(api, 20)  # warm
                for name, open_stalls in phases(port, made["api_key"]).items():
                    stalled = open_stalls()
                    try:
                        results[name] = timed_reads(api, args.requests)
                    finally:
                        for sock in stalled:
                            sock.close()
        finally:
            stop(process, workdir / "service.log")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    text = json.dumps(run(args), indent=2)
    sys.stdout.write(text + "\n")
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
