"""orders with alternatives: the shapes an order lists (when more than one), which it prefers,
the model it was ordered by and the engine that serves it, and which alternative each create
attempt was for

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03 17:40:00.000000

Every order before this had one shape, its own columns: no list, the cheapest preferred (the
only one), no model, and every attempt for that first and only alternative.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a migration says what the schema was at its revision.
MAX_ALTERNATIVES = 8
PREFERENCES = ("cheapest", "listed")


def upgrade() -> None:
    with op.batch_alter_table("orders") as batch:
        batch.add_column(sa.Column("alternatives", sa.JSON()))
        batch.add_column(sa.Column("model", sa.String(length=200)))
        batch.add_column(sa.Column("serve_engine", sa.String(length=20)))
        batch.add_column(
            sa.Column(
                "prefer", sa.String(length=20), nullable=False, server_default=sa.text("'cheapest'")
            )
        )
        batch.create_check_constraint(
            "order_prefer", f"prefer IN ({', '.join(repr(p) for p in PREFERENCES)})"
        )
    with op.batch_alter_table("deployments") as batch:
        batch.add_column(
            sa.Column("alternative", sa.Integer(), nullable=False, server_default=sa.text("1"))
        )
        batch.create_check_constraint(
            "deployment_alternative", f"alternative BETWEEN 1 AND {MAX_ALTERNATIVES}"
        )


def downgrade() -> None:
    with op.batch_alter_table("deployments") as batch:
        batch.drop_constraint("deployment_alternative", type_="check")
        batch.drop_column("alternative")
    with op.batch_alter_table("orders") as batch:
        batch.drop_constraint("order_prefer", type_="check")
        batch.drop_column("prefer")
        batch.drop_column("serve_engine")
        batch.drop_column("model")
        batch.drop_column("alternatives")
