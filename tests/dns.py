"""A stand-in resolver, so that tests never ask real DNS about public-looking names."""

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock


@contextmanager
def fake_dns(answers: dict[str, str]) -> Iterator[list[str]]:
    """Resolve the names in `answers` to their address, no other name; yields the names asked."""
    asked: list[str] = []

    def getaddrinfo(host: str, port: int, *_args: Any, **_kwargs: Any) -> list[Any]:
        asked.append(host)
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        address = answers[host]
        if ":" in address:
            return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    with mock.patch("socket.getaddrinfo", getaddrinfo):
        yield asked
