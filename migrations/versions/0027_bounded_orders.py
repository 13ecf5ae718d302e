"""orders by account and time placed; when an ended order was pruned

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07 12:00:00.000000

Placing an order counts the account's placements in the last hour (the placement rate); by
account and time placed it reads that hour's entries alone, however many orders the account
placed before. Orders past the retention are pruned oldest first; one the ledger names keeps
its row, marked `pruned_at`, and the index by it and by time leaves those out of the search.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.storage import types as column_types

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_orders_account_id_created_at", "orders", ["account_id", "created_at"])
    with op.batch_alter_table("orders") as batch:
        batch.add_column(
            sa.Column("pruned_at", column_types.UTCDateTime(timezone=True), nullable=True)
        )
    op.create_index("ix_orders_pruned_at_updated_at", "orders", ["pruned_at", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_orders_pruned_at_updated_at", table_name="orders")
    with op.batch_alter_table("orders") as batch:
        batch.drop_column("pruned_at")
    op.drop_index("ix_orders_account_id_created_at", table_name="orders")
