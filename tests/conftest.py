"""Fixtures: every storage test runs on SQLite and, when configured, on PostgreSQL.

PostgreSQL tests run when AUTOPROVISION_TEST_DATABASE_URL points at a server (e.g.
postgresql+asyncpg://postgres@127.0.0.1:5432/test). Each worker clones a migrated template
once and lends the clone to one test at a time, emptied in between (tests/databases.py).
"""

import asyncio
import os
import shutil
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from app.main import create_app
from app.settings import Settings
from app.storage.db import create_engine
from tests.databases import (
    PG_URL_ENV,
    WorkerDatabase,
    migrated,
    pg_base_url,
    pg_database,
)
from tests.waiting import started
from tests.workers import auto_workers, usable_cpus

BACKENDS = ["sqlite", "postgres"]

# The fixtures that tests in more than one folder use, each defined once (settings first: the
# simulators' plugin imports it, and a plugin imported before it is loaded is not rewritten).
pytest_plugins = ["tests.fixtures.settings", "tests.fixtures.simulators"]


# A test that uses one of these is `slow` (`make test-fast` leaves it out): a browser, the
# watcher against the simulators on the real clock, processes of its own, a webhook receiver.
SLOW_FIXTURES = frozenset(
    {"browser", "page", "live_mode_settings", "sim_process", "running_service", "receiver"}
)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: a worker per core and one more (tests/workers.py says why)."""
    return auto_workers(usable_cpus(), os.environ)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


_real_getaddrinfo = socket.getaddrinfo


def _loopback_only_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    """Resolve addresses and `localhost` as usual; refuse every other name without asking DNS
    (a test that needs a name to resolve gives its answers with tests/dns.py)."""
    name = host.decode() if isinstance(host, bytes) else host
    if name is None or name == "localhost":
        return _real_getaddrinfo(host, *args, **kwargs)
    try:  # an address in any form the resolver reads without asking DNS ("127.1" too)
        _real_getaddrinfo(name, None, flags=socket.AI_NUMERICHOST)
    except socket.gaierror:
        raise socket.gaierror(socket.EAI_NONAME, f"tests do not resolve {name!r}") from None
    return _real_getaddrinfo(host, *args, **kwargs)


@pytest.fixture(autouse=True)
def no_real_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests send nothing beyond loopback, DNS queries included."""
    monkeypatch.setattr(socket, "getaddrinfo", _loopback_only_getaddrinfo)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file that tests copy instead of migrating each time."""
    path = tmp_path_factory.mktemp("template") / "template.db"
    asyncio.run(migrated(f"sqlite+aiosqlite:///{path}"))
    return path


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """The name of a migrated PostgreSQL template database for this run."""
    if pg_base_url() is None:
        pytest.skip(f"PostgreSQL tests need {PG_URL_ENV}")
    with pg_database("ap_template") as (name, url):
        asyncio.run(migrated(url))
        yield name


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Which database this test runs on."""
    if request.param == "postgres" and pg_base_url() is None:
        pytest.skip(f"PostgreSQL tests need {PG_URL_ENV}")
    return str(request.param)


@pytest.fixture(scope="session")
def postgres_worker_database(postgres_template: str) -> Iterator[WorkerDatabase]:
    """This worker's PostgreSQL database, lent to one test at a time."""
    database = WorkerDatabase(postgres_template)
    yield database
    database.close()


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty database of this test's own."""
    if backend == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        path = tmp_path / "test.db"
        shutil.copyfile(template, path)
        yield f"sqlite+aiosqlite:///{path}"
        return
    database: WorkerDatabase = request.getfixturevalue("postgres_worker_database")
    yield database.lend()
    database.take_back()


@pytest.fixture
def empty_database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A database with no tables at all (for migration tests)."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"
        return
    with pg_database("ap_empty") as (_name, url):
        yield url


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on this test's database."""
    engine = create_engine(database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    """The application, started (lifespan run) on this test's database."""
    application = create_app(settings)
    async with started(application):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client talking to the app in-process."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c
