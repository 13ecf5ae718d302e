"""Prometheus metrics, in the text format scrapers read."""

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

router = APIRouter(tags=["health"])


@router.get("/metrics", response_class=Response)
async def metrics() -> Response:
    """Poll latency and errors, orders by status, stock-to-create, creates, boot times."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
