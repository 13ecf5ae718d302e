"""Cursor pagination shared by every newest-first list."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Query
from pydantic import BaseModel

from app.api.schemas import Page
from app.core.text import OneLine

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


@dataclass(frozen=True)
class PageRequest:
    """A list's `limit` and `cursor` query parameters, as one value."""

    limit: int
    cursor: str | None

    @property
    def fetch(self) -> int:
        """How many rows to read: one more than a page, to know whether another follows."""
        return self.limit + 1

    def split(self, items: list[T], key: Callable[[T], str]) -> tuple[list[T], str | None]:
        """This page of a `fetch`-long read, and the cursor of the next (None on the last)."""
        return split_page(items, self.limit, key)

    def page_of(self, items: list[Any], out: type[OutT]) -> Page[OutT]:
        """A `fetch`-long read of rows with ids, as a page of `out` with its cursor."""
        return page_of(items, self.limit, out)


def paged(prefix: str | None = None, *, default_limit: int = 20) -> Any:
    """The one dependency of every list: `limit`, and a `cursor` that is an id of `prefix`'s
    kind (or, without a prefix, any short one-line cursor)."""
    cursor_query = (
        cursor_param(prefix)
        if prefix
        else Query(max_length=64, description="The `next_cursor` of the previous page.")
    )

    def page_request(
        limit: Limit = default_limit,
        cursor: Annotated[str | None, cursor_query, OneLine] = None,
    ) -> PageRequest:
        return PageRequest(limit, cursor)

    return Depends(page_request)
