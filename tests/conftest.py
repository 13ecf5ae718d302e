"""Fixtures: every storage test runs on SQLite and, when configured, on PostgreSQL.

PostgreSQL tests run when AUTOPROVISION_TEST_DATABASE_URL points at a server (e.g.
postgresql+asyncpg://postgres@127.0.0.1:5432/test). Each test gets a database of its own,
cloned from a migrated template made once per run, and dropped afterwards.
"""

import asyncio
import contextlib
import os
import shutil
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.main import create_app
from app.settings import Settings
from app.storage.db import create_engine, migrate
from tests.waiting import started

PG_URL_ENV = "AUTOPROVISION_TEST_DATABASE_URL"
BACKENDS = ["sqlite", "postgres"]

# The fixtures that tests in more than one folder use, each defined once (settings first: the
# simulators' plugin imports it, and a plugin imported before it is loaded is not rewritten).
pytest_plugins = ["tests.fixtures.settings", "tests.fixtures.simulators"]


# A test that uses one of these is `slow` (`make test-fast` leaves it out): a browser, the
# watcher against the simulators on the real clock, processes of its own, a webhook receiver.
SLOW_FIXTURES = frozenset(
    {"browser", "page", "live_mode_settings", "sim_process", "running_service", "receiver"}
)


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


def _pg_base_url() -> str | None:
    return os.environ.get(PG_URL_ENV) or None


def _with_database(url: str, database: str) -> str:
    return make_url(url).set(database=database).render_as_string(hide_password=False)


async def _pg_admin(url: str, sql: str) -> None:
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


async def _migrate_url(url: str) -> None:
    engine = create_engine(url)
    try:
        await migrate(engine)
    finally:
        await engine.dispose()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file that tests copy instead of migrating each time."""
    path = tmp_path_factory.mktemp("template") / "template.db"
    asyncio.run(_migrate_url(f"sqlite+aiosqlite:///{path}"))
    return path


@contextlib.contextmanager
def _pg_database(prefix: str, template: str | None = None) -> Iterator[tuple[str, str]]:
    """A new PostgreSQL database (a copy of `template`, if given), dropped afterwards: its name
    and URL."""
    base = _pg_base_url()
    assert base is not None
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    copied = "" if template is None else f' TEMPLATE "{template}"'
    asyncio.run(_pg_admin(base, f'CREATE DATABASE "{name}"{copied}'))
    try:
        yield name, _with_database(base, name)
    finally:
        asyncio.run(_pg_admin(base, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """The name of a migrated PostgreSQL template database for this run."""
    if _pg_base_url() is None:
        pytest.skip(f"PostgreSQL tests need {PG_URL_ENV}")
    with _pg_database("ap_template") as (name, url):
        asyncio.run(_migrate_url(url))
        yield name


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Which database this test runs on."""
    if request.param == "postgres" and _pg_base_url() is None:
        pytest.skip(f"PostgreSQL tests need {PG_URL_ENV}")
    return str(request.param)


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty database of this test's own."""
    if backend == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        path = tmp_path / "test.db"
        shutil.copyfile(template, path)
        yield f"sqlite+aiosqlite:///{path}"
        return
    template_name: str = request.getfixturevalue("postgres_template")
    with _pg_database("ap_test", template_name) as (_name, url):
        yield url


@pytest.fixture
def empty_database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A database with no tables at all (for migration tests)."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"
        return
    with _pg_database("ap_empty") as (_name, url):
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
