"""Run an ASGI app on a real socket for tests that need real HTTP (timeouts, official SDKs)."""

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import uvicorn
from starlette.types import ASGIApp

from app.simulators.network import Certificate
from tests.waiting import eventually_sync


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve_in_thread(
    app: ASGIApp,
    *,
    lifespan: Literal["auto", "on", "off"] = "auto",
    certificate: Certificate | None = None,
    port: int | None = None,
    http: type[asyncio.Protocol] | None = None,
) -> Iterator[str]:
    """Serve `app` with uvicorn in a background thread (over HTTPS with `certificate`; on
    `port`, or a free one; with the `http` protocol class, or uvicorn's own); yields its base
    URL."""
    port = port or free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="error",
        lifespan=lifespan,
        # An event stream left open by a failing test must not hold the shutdown forever.
        timeout_graceful_shutdown=5,
        ssl_certfile=str(certificate.cert_file) if certificate else None,
        ssl_keyfile=str(certificate.key_file) if certificate else None,
    )
    if http is not None:
        config.http = http
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()

    def started() -> bool:
        if not thread.is_alive():
            raise RuntimeError("test server did not start")
        return bool(server.started)

    eventually_sync(started, 20, 0.02, what="test server did not start")
    try:
        yield f"{'https' if certificate else 'http'}://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
