"""The dashboard is served by the service itself, under a strict content security policy."""

import httpx


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
