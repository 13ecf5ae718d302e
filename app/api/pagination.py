"""Cursor pagination shared by every newest-first list."""

from typing import Annotated, Any

from fastapi import Query

Limit = Annotated[int, Query(ge=1, le=100, description="How many items per page.")]


def cursor_param(prefix: str) -> Any:
    """A `cursor` query parameter that only accepts ids of one kind."""
    return Query(
        pattern=rf"^{prefix}_[0-9a-z]{{26}}$",
        description="The `next_cursor` of the previous page.",
    )


def next_cursor(ids: list[str], limit: int) -> str | None:
    """The cursor for the page after this one, or None when this page is the last."""
    return ids[-1] if len(ids) == limit else None
