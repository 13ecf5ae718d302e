"""What every table shares: the declarative base, its constraint names, and state columns."""

from enum import StrEnum
from typing import Any

from sqlalchemy import Enum, MetaData, text
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    """Declarative base with a naming convention so migrations name constraints predictably."""

    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(column_0_label)s",
            "uq": "uq_%(table_name)s_%(column_0_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


def state_column(enum: type[StrEnum], name: str) -> Enum:
    """A column of one of `enum`'s values: VARCHAR with a CHECK on both databases."""
    return Enum(
        enum,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=20 if name != "order_event_kind" else 40,
        values_callable=lambda members: [m.value for m in members],
        validate_strings=True,
    )


# Partial indexes: the publisher finds the few lines not yet published among all of them.
UNPUBLISHED: dict[str, Any] = {
    "sqlite_where": text("NOT published"),
    "postgresql_where": text("NOT published"),
}
