"""Path parameters shared by the routes."""

from typing import Annotated

from fastapi import Path

from app.core.text import OneLine

# An id from the URL goes into SQL as it is: one PostgreSQL cannot take (NUL) is a 422 here.
PathId = Annotated[str, Path(description="The id, as returned when it was created."), OneLine]
