"""Liveness and readiness probes."""

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.api.errors import error_response
from app.api.strict_json import StrictJsonRoute
from app.storage.db import ping

READY_TIMEOUT_SECONDS = 5
router = APIRouter(route_class=StrictJsonRoute, tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up and serving."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None)
async def readyz(request: Request) -> dict[str, str | bool] | JSONResponse:
    """The database answers; a load balancer should send traffic here only then. The body
    also says whether the service is in dry run (it sends no creates)."""
    try:
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            await ping(request.app.state.read_sessionmaker)
    except Exception:
        return error_response(503, "database_unavailable", "the database is not reachable")
    return {"status": "ready", "dry_run": request.app.state.settings.dry_run}
