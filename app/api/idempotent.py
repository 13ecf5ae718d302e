"""Answer a POST once per Idempotency-Key: the first response is stored and replayed."""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession

from app.services import idempotency

IdempotencyKeyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="Retry-safe key: the same key and body within 24 h replays the response.",
        # Checked by the service, which answers its own code (`invalid_idempotency_key`).
        json_schema_extra={"maxLength": idempotency.MAX_KEY_LENGTH},
    ),
]


async def respond_once(
    request: Request,
    session: AsyncSession,
    *,
    principal: str,
    key: str | None,
    body: BaseModel,
    status_code: int,
    action: Callable[[], Awaitable[BaseModel]],
) -> JSONResponse:
    """Run `action` and answer with its result, or replay what this key answered before."""

    async def run() -> Any:
        return (await action()).model_dump(mode="json")

    if key is None:
        return JSONResponse(await run(), status_code=status_code)
    stored = await idempotency.run_once(
        session,
        principal=principal,
        key=key,
        method=request.method,
        path=request.url.path,
        payload=body.model_dump(mode="json"),
        status_code=status_code,
        action=run,
    )
    headers = {"Idempotent-Replayed": "true"} if stored.replayed else None
    return JSONResponse(stored.body, status_code=stored.status_code, headers=headers)
