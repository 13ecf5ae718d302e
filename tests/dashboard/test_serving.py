"""The dashboard is served by the service itself, under a strict content security policy."""

import re

import httpx

from app.main import create_app
from app.settings import Settings
from tests.waiting import started


async def test_the_dashboard_page_is_served_with_a_strict_policy(
    client: httpx.AsyncClient,
) -> None:
    page = await client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert '<script type="module" src="/assets/dashboard.js">' in page.text
    script = await client.get("/assets/dashboard.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]


async def test_the_api_docs_load_swagger_ui_from_the_service(client: httpx.AsyncClient) -> None:
    page = await client.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    linked = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    assert sorted(linked) == [
        "/assets/vendor/swagger-ui/favicon-32x32.png",
        "/assets/vendor/swagger-ui/swagger-ui-bundle.js",
        "/assets/vendor/swagger-ui/swagger-ui.css",
    ]
    assert "http://" not in page.text and "https://" not in page.text
    assert '"validatorUrl": null' in page.text  # no badge from validator.swagger.io
    for path, kind in zip(sorted(linked), ("image/png", "javascript", "text/css"), strict=True):
        asset = await client.get(path)
        assert asset.status_code == 200 and kind in asset.headers["content-type"], path
    assert (await client.get("/openapi.json")).json()["info"]["title"] == "autoprovision"
    assert (await client.get("/docs/oauth2-redirect")).status_code == 200
    assert (await client.get("/redoc")).status_code == 404  # no second UI, from a CDN


async def test_without_a_docs_url_the_footer_and_the_api_point_at_the_repository(
    client: httpx.AsyncClient,
) -> None:
    page = (await client.get("/")).text
    footer = re.search(r'<footer class="site-footer">(.*?)</footer>', page)
    assert footer, page
    assert "<code>docs/</code> in the repository" in footer.group(1)
    assert "<code>make docs</code>" in footer.group(1)
    assert 'href="/docs"' in footer.group(1)  # the API reference, served here
    assert 'data-testid="docs-link"' not in page
    info = (await client.get("/openapi.json")).json()["info"]
    assert "`docs/` in the repository" in info["description"]


async def test_a_docs_url_is_linked_from_the_footer_and_the_api(settings: Settings) -> None:
    hosted = "https://docs.example.com/autoprovision/?a=1&b=<2>"
    app = create_app(settings.model_copy(update={"docs_url": hosted}))
    async with started(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            page = (await client.get("/")).text
            info = (await client.get("/openapi.json")).json()["info"]
    escaped = "https://docs.example.com/autoprovision/?a=1&amp;b=&lt;2&gt;"
    assert f'<a href="{escaped}" data-testid="docs-link">Documentation</a>' in page
    assert "in the repository" not in page  # control: the other footer is not there
    assert info["description"] == f"Documentation: [{hosted}]({hosted})"
