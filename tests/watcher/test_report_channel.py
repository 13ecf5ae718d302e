"""The create sends an order's shell script with where and how its machine reports
(`AUTOPROVISION_REPORT_URL`, `AUTOPROVISION_REPORT_TOKEN`) when machines can reach the service;
in memory, on a FakeAdapter. Nothing sleeps."""

import asyncio

import pytest
from pydantic import AnyHttpUrl
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.providers import fake, registry
from app.services.machine_reports import digest
from app.settings import Settings
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Attempt
from tests.factories import waiting_orders
from tests.watcher.in_memory import SETTINGS, OnFakeAdapter

SCRIPT = "#!/bin/bash\necho serving\n"
PUBLIC = "https://gpus.example.com"


async def _sent(engine: AsyncEngine, settings: Settings, script: str, **update: object) -> str:
    """What the create sent as the script of an order with `script`, the watcher's settings
    updated with `update`."""
    watching = OnFakeAdapter(engine, settings, {**SETTINGS, **update})
    offer = watching.fake.offer(price="20.00")
    with registry.offering(fake.SPEC):
        await waiting_orders(engine, offer, startup_script=script)
    await watching.watcher.refresh_waiting()
    await watching.watcher.on_offers(watching.fake.provider, [offer], watching.clock())
    await asyncio.gather(*watching.watcher.deployer.in_flight)
    (create,) = watching.fake.creates
    assert create.startup_script is not None
    return create.startup_script


async def test_the_script_tells_its_machine_where_to_report_with_its_attempt_s_token(
    engine: AsyncEngine, settings: Settings
) -> None:
    sent = await _sent(engine, settings, SCRIPT, public_url=AnyHttpUrl(PUBLIC))
    shebang, url_line, token_line, *rest = sent.split("\n")
    assert (shebang, url_line, rest) == (
        "#!/bin/bash",
        f"export AUTOPROVISION_REPORT_URL={PUBLIC}/v1/machines/report",
        ["echo serving", ""],
    )
    token = token_line.removeprefix("export AUTOPROVISION_REPORT_TOKEN=")
    async with session_scope(create_sessionmaker(engine)) as session:
        (kept,) = (await session.scalars(select(Attempt.report_token_sha256))).all()
    assert kept == digest(token)  # the attempt keeps its digest, not the token


@pytest.mark.parametrize(
    ("script", "update"),
    [
        (SCRIPT, {"mode": "live"}),  # no public URL: machines cannot reach the service
        ("#cloud-config\nruncmd: [ls]\n", {"public_url": AnyHttpUrl(PUBLIC)}),
    ],
)
async def test_otherwise_the_script_goes_as_it_was_given(
    engine: AsyncEngine, settings: Settings, script: str, update: dict[str, object]
) -> None:
    assert await _sent(engine, settings, script, **update) == script
