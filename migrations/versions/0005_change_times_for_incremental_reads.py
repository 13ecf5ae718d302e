"""change times for incremental reads

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29 16:28:46.996379
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.storage import types as column_types

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("accounts", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("updated_at", column_types.UTCDateTime(timezone=True), nullable=True)
        )
        batch_op.create_index(batch_op.f("ix_accounts_updated_at"), ["updated_at"], unique=False)

    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.create_index("ix_orders_updated_at", ["updated_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.drop_index("ix_orders_updated_at")

    with op.batch_alter_table("accounts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_accounts_updated_at"))
        batch_op.drop_column("updated_at")
