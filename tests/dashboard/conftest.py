"""Browser tests: the service (watcher on) against the simulators, driven in Debian's Chromium.

They skip, saying why, when Chromium is missing; `.ci/run` installs Debian's.
Each test leaves a screenshot in test-artifacts/screenshots/.
"""

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from app.settings import Settings
from app.simulators.control import SimControlSync
from tests.dashboard.service import SCREENSHOTS, Api, Service
from tests.fixtures.settings import live_settings

CHROMIUM = os.environ.get("AUTOPROVISION_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
BOOT_SECONDS = 4.0  # long enough for the page to show "deployed" before "running"


@pytest.fixture(scope="module")
def browser(sqlite_template: Path) -> Iterator[Browser]:
    """Debian's Chromium, headless, through Playwright (no browser download needed).

    Playwright's sync API keeps an event loop running in this thread while it is open, so it
    opens after the fixtures that run their own loop (the database template) and closes with
    the module, before any asyncio test.
    """
    if not Path(CHROMIUM).exists():
        pytest.skip(f"browser tests need Chromium at {CHROMIUM}: apt-get install chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def sim_boot_seconds() -> float:
    """Long enough for the page to show "deployed" before "running"."""
    return BOOT_SECONDS


@pytest.fixture
def running_service(
    sim_sync: SimControlSync, sim_url: str, sqlite_template: Path, tmp_path: Path
) -> Iterator[Service]:
    """The service with its watcher, on a database of this test's own."""
    database = tmp_path / "dashboard.db"
    shutil.copyfile(sqlite_template, database)
    settings: Settings = live_settings(f"sqlite+aiosqlite:///{database}", sim_url)
    service = Service(settings)
    service.start()
    yield service
    service.stop()


@pytest.fixture
def service(running_service: Service) -> str:
    """The running service's URL."""
    return f"http://127.0.0.1:{running_service.port}"


@pytest.fixture
def api(service: str) -> Iterator[Api]:
    """An account with $100 on the running service."""
    handle = Api(service)
    yield handle
    handle.client.close()


@pytest.fixture
def page(browser: Browser, service: str, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh browser tab at laptop size on the service; a screenshot is kept afterwards."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=service)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    # An API answering 4xx is logged by Chromium itself ("Failed to load resource"); that is
    # the page working, not failing.
    tab.on(
        "console",
        lambda message: (
            errors.append(message.text)
            if message.type == "error" and not message.text.startswith("Failed to load resource")
            else None
        ),
    )
    yield tab
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=SCREENSHOTS / f"{request.node.name}.png", full_page=True)
    context.close()
    assert not errors, f"the page logged errors: {errors}"
