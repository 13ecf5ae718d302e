"""order attempt counter

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29 16:58:39.058511
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))

    op.execute(
        "UPDATE orders SET attempts = COALESCE("
        "(SELECT MAX(attempt) FROM deployments WHERE deployments.order_id = orders.id), 0)"
    )


def downgrade() -> None:
    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.drop_column("attempts")
