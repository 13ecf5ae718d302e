"""an index on orders by account and status

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-04 15:00:00.000000

Placing an order counts the account's waiting orders (the per-account cap). With 80,000 orders
waiting that count read every waiting order's index entry and took 7 ms of the 14 ms a
placement cost on PostgreSQL; by account and status it reads the account's own.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_orders_account_id_status", "orders", ["account_id", "status"])


def downgrade() -> None:
    op.drop_index("ix_orders_account_id_status", table_name="orders")
