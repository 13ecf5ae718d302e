"""The dashboard: static HTML, CSS and JavaScript that call the same REST API as any client."""

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
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


@router.get("/")
async def dashboard() -> FileResponse:
    """The dashboard's one page."""
    return FileResponse(DASHBOARD_DIR / "index.html", headers=SECURITY_HEADERS)


def install_dashboard(app: FastAPI) -> None:
    """Serve the page at `/` and its files under `/assets/`."""
    app.include_router(router)
    app.mount("/assets", StaticFiles(directory=DASHBOARD_DIR / "assets"), name="assets")
