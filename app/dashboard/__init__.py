"""The dashboard: static HTML, CSS and JavaScript that call the same REST API as any client;
and the interactive API docs at `/docs`, drawn by the Swagger UI vendored beside it."""

import html
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DASHBOARD_DIR = Path(__file__).resolve().parent
# The page talks to its own origin only, runs only its own scripts, and may not be framed.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

router = APIRouter(include_in_schema=False)
API_DOCS_URL = "/docs"


FOOTER_SLOT = (
    "<!-- footer: the documentation links, filled in by app/dashboard (AUTOPROVISION_DOCS_URL) -->"
)


def docs_footer(docs_url: str | None) -> str:
    """The page's footer: the documentation (at `docs_url`, else where it is in the
    repository) and the API's interactive docs."""
    if docs_url is None:
        manual = (
            "Documentation: <code>docs/</code> in the repository (<code>make docs</code> "
            "builds it into <code>site/</code>)"
        )
    else:
        manual = f'<a href="{html.escape(docs_url)}" data-testid="docs-link">Documentation</a>'
    api = f'<a href="{API_DOCS_URL}" data-testid="api-docs-link">API reference</a>'
    return f'<footer class="site-footer">{manual} · {api}</footer>'


def api_description(docs_url: str | None) -> str:
    """The OpenAPI document's description (Markdown): where the documentation is."""
    if docs_url is None:
        return "Documentation: `docs/` in the repository (`make docs` builds it into `site/`)."
    return f"Documentation: [{docs_url}]({docs_url})"


@router.get("/")
async def dashboard(request: Request) -> HTMLResponse:
    """The dashboard's one page, its footer linking to the documentation."""
    page = (DASHBOARD_DIR / "index.html").read_text()
    docs_url = request.app.state.settings.docs_url
    footer = docs_footer(str(docs_url) if docs_url is not None else None)
    return HTMLResponse(page.replace(FOOTER_SLOT, footer), headers=SECURITY_HEADERS)


SWAGGER_UI = "/assets/vendor/swagger-ui"
# No "validate this document" badge: it is an image from validator.swagger.io, given the
# document's URL. Everything /docs loads comes from this service.
SWAGGER_UI_PARAMETERS = {"validatorUrl": None}


def install_dashboard(app: FastAPI) -> None:
    """Serve the page at `/` and its files under `/assets/`."""
    app.include_router(router)
    app.mount("/assets", StaticFiles(directory=DASHBOARD_DIR / "assets"), name="assets")


def install_api_docs(app: FastAPI) -> None:
    """Swagger UI at /docs (the app is made with docs_url=None, so FastAPI adds none itself),
    from the files under /assets/vendor/swagger-ui/ instead of a CDN: it works offline.
    FastAPI's own page, as documented in "Custom Docs UI Static Assets"."""
    openapi_url = app.openapi_url
    oauth2_redirect_url = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"
    if openapi_url is None:  # no OpenAPI document: nothing to show
        return

    async def swagger_ui_html(request: Request) -> HTMLResponse:
        root_path = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=root_path + openapi_url,
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=root_path + oauth2_redirect_url,
            swagger_js_url=f"{root_path}{SWAGGER_UI}/swagger-ui-bundle.js",
            swagger_css_url=f"{root_path}{SWAGGER_UI}/swagger-ui.css",
            swagger_favicon_url=f"{root_path}{SWAGGER_UI}/favicon-32x32.png",
            swagger_ui_parameters={**SWAGGER_UI_PARAMETERS, **(app.swagger_ui_parameters or {})},
        )

    async def swagger_ui_redirect(request: Request) -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    app.add_route(API_DOCS_URL, swagger_ui_html, include_in_schema=False)
    app.add_route(oauth2_redirect_url, swagger_ui_redirect, include_in_schema=False)
