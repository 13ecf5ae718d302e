"""Cursor pagination shared by every newest-first list."""

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Query
from pydantic import BaseModel

from app.api.schemas import Page

T = TypeVar("T")
OutT = TypeVar("OutT", bound=BaseModel)


Limit = Annotated[int, Query(ge=1, le=100, description="How many items per page.")]


def cursor_param(prefix: str) -> Any:
    """A `cursor` query parameter that only accepts ids of one kind."""
    return Query(
        pattern=rf"^{prefix}_[0-9a-z]{{26}}$",
        description="The `next_cursor` of the previous page.",
    )


def split_page(items: list[T], limit: int, key: Callable[[T], str]) -> tuple[list[T], str | None]:
    """Cut a `limit + 1` fetch into this page and the cursor of the next (None on the last page)."""
    if len(items) <= limit:
        return items, None
    page = items[:limit]
    return page, key(page[-1])


def page_of(items: list[Any], limit: int, out: type[OutT]) -> Page[OutT]:
    """A `limit + 1` fetch of rows with ids, presented as a page of `out` with its cursor."""
    page, next_cursor = split_page(items, limit, key=lambda row: row.id)
    return Page[out](data=[out.model_validate(row) for row in page], next_cursor=next_cursor)  # type: ignore[valid-type]
