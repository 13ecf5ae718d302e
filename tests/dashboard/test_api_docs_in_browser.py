"""The interactive API docs (/docs) render in a browser that reaches nothing beyond this
machine: Swagger UI comes from the package, not from a CDN. The dashboard's footer links to
them and to the documentation site (AUTOPROVISION_DOCS_URL)."""

import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fastapi import FastAPI
from playwright.sync_api import Browser, BrowserContext, Route, expect

from app.main import create_app
from app.settings import Settings
from tests.dashboard.service import SCREENSHOTS
from tests.fixtures.settings import ADMIN_KEY, SECRET_KEY
from tests.servers import serve_in_thread

LOOPBACK = {"127.0.0.1", "localhost", "[::1]", "::1"}
HOSTED_DOCS = "https://docs.example.com/autoprovision/"


@pytest.fixture
def service(sqlite_template: Path, tmp_path: Path) -> Iterator[str]:
    """The service, no watcher (the docs need none), on a database of its own; its
    documentation said to be hosted at HOSTED_DOCS."""
    database = tmp_path / "docs.db"
    shutil.copyfile(sqlite_template, database)
    settings = Settings(
        _env_file=None,
        database_url=f"sqlite+aiosqlite:///{database}",
        admin_api_key=ADMIN_KEY,
        secret_key=SECRET_KEY,
        watcher=False,
        docs_url=HOSTED_DOCS,
    )
    with serve_in_thread(create_app(settings), lifespan="on") as url:
        yield url


class Offline:
    """A browser context in which every request beyond loopback fails (and is noted)."""

    def __init__(self, browser: Browser) -> None:
        self.blocked: list[str] = []
        self.context: BrowserContext = browser.new_context(viewport={"width": 1280, "height": 900})
        self.context.route("**/*", self._route)

    def _route(self, route: Route) -> None:
        host = urlsplit(route.request.url).hostname or ""
        if host in LOOPBACK:
            route.continue_()
        else:
            self.blocked.append(route.request.url)
            route.abort("internetdisconnected")


@pytest.fixture
def offline(browser: Browser) -> Iterator[Offline]:
    handle = Offline(browser)
    yield handle
    handle.context.close()


def test_the_api_docs_render_with_no_network(offline: Offline, service: str) -> None:
    page = offline.context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{service}/docs")
    orders = page.locator(".opblock-tag-section", has=page.locator("h3", has_text="orders"))
    expect(orders).to_be_visible()
    place = page.locator(".opblock-post", has=page.get_by_text("/v1/orders", exact=True))
    expect(place.first).to_be_visible()
    assert page.locator(".opblock").count() > 20  # every operation, not one group
    place.first.locator(".opblock-summary").click()  # opens: the page is live, not a picture
    expect(place.first.locator(".opblock-body")).to_be_visible()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "api_docs_offline.png")
    assert offline.blocked == []  # nothing was even asked of another host
    assert not errors
    # Control: the blocking works, and is noted.
    failed = page.evaluate(
        "fetch('https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui.css')"
        ".then(() => false, () => true)"
    )
    assert failed and offline.blocked == [
        "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui.css"
    ]


def test_control_fastapis_default_docs_stay_blank_with_no_network(offline: Offline) -> None:
    plain = FastAPI()

    @plain.get("/hello")
    async def hello() -> dict[str, str]:
        return {}

    with serve_in_thread(plain) as url:
        page = offline.context.new_page()
        page.goto(f"{url}/docs")  # waits for the load event: the scripts have failed by then
        assert any(u.startswith("https://cdn.jsdelivr.net/") for u in offline.blocked)
        assert page.locator(".opblock").count() == 0
        assert page.locator("#swagger-ui").inner_text() == ""


def test_the_dashboards_footer_links_to_the_docs(offline: Offline, service: str) -> None:
    page = offline.context.new_page()
    page.goto(service)
    expect(page.get_by_label("API key")).to_be_visible()  # the sign-in page
    footer = page.locator("footer")
    expect(footer).to_be_visible()  # on the first screen, no scrolling
    assert footer.bounding_box()["y"] + footer.bounding_box()["height"] <= 900  # type: ignore[index]
    expect(footer.get_by_role("link", name="Documentation")).to_have_attribute("href", HOSTED_DOCS)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "signin_footer.png")
    footer.get_by_role("link", name="API reference").click()
    expect(page.locator(".opblock").first).to_be_visible()  # Swagger UI, offline
    expect(page.get_by_role("link", name=HOSTED_DOCS)).to_be_visible()  # its description
    assert offline.blocked == []
