"""stock history keeps each offer's nodes and cluster interconnect, so a cluster is never counted
as one of its machines

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03 10:00:00.000000

Every row recorded before this was a single machine: its nodes are 1 and it has no cluster
interconnect.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a migration says what the schema was at its revision.
# (table, its index by machine, the index's last column)
MACHINE_INDEXES = (
    ("stock_intervals", "ix_stock_intervals_machine_first_seen", "first_seen_at"),
    ("stock_days", "ix_stock_days_machine_day", "day"),
)
OPEN_INTERVAL = "gone_at IS NULL"


def upgrade() -> None:
    for table, index, last in MACHINE_INDEXES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column("nodes", sa.Integer(), nullable=False, server_default=sa.text("1"))
            )
            batch.add_column(sa.Column("cluster_interconnect", sa.String(length=20)))
        op.drop_index(index, table_name=table)
        op.create_index(index, table, ["gpu_model", "gpu_count", "nodes", last])


def downgrade() -> None:
    # Dropping a column rebuilds the table on SQLite: the partial index is made again by hand,
    # where it is known to be partial.
    op.drop_index("uq_stock_intervals_open_offer", table_name="stock_intervals")
    for table, index, last in MACHINE_INDEXES:
        op.drop_index(index, table_name=table)
        with op.batch_alter_table(table) as batch:
            batch.drop_column("cluster_interconnect")
            batch.drop_column("nodes")
        op.create_index(index, table, ["gpu_model", "gpu_count", last])
    op.create_index(
        "uq_stock_intervals_open_offer",
        "stock_intervals",
        ["provider", "region", "sku"],
        unique=True,
        sqlite_where=sa.text(OPEN_INTERVAL),
        postgresql_where=sa.text(OPEN_INTERVAL),
    )
