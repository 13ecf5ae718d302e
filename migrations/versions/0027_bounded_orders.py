"""an index on orders by account and time placed

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07 12:00:00.000000

Placing an order counts the account's placements in the last hour (the placement rate); by
account and time placed it reads that hour's entries alone, however many orders the account
placed before.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_orders_account_id_created_at", "orders", ["account_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_orders_account_id_created_at", table_name="orders")
