"""offer read errors

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29 15:56:00.923741
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.storage import types as column_types

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("offer_snapshots", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("checked_at", column_types.UTCDateTime(timezone=True), nullable=True)
        )
        batch_op.alter_column(
            "fetched_at", existing_type=column_types.UTCDateTime(timezone=True), nullable=True
        )


def downgrade() -> None:
    with op.batch_alter_table("offer_snapshots", schema=None) as batch_op:
        batch_op.alter_column(
            "fetched_at", existing_type=column_types.UTCDateTime(timezone=True), nullable=False
        )
        batch_op.drop_column("checked_at")
