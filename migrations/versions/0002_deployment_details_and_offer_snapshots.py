"""deployment details and offer snapshots

Existing deployment rows get empty defaults for the new non-null columns.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 14:56:54.152184
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.storage import types as column_types

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "offer_snapshots",
        sa.Column("provider", sa.String(length=20), nullable=False),
        sa.Column("offers", sa.JSON(), nullable=False),
        sa.Column("fetched_at", column_types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("error", sa.String(length=500), nullable=True),
        sa.PrimaryKeyConstraint("provider", name=op.f("pk_offer_snapshots")),
    )
    with op.batch_alter_table("deployments", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("gpu_model", sa.String(length=40), nullable=False, server_default="")
        )
        batch_op.add_column(
            sa.Column("gpu_count", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(sa.Column("offer_id", sa.String(length=128), nullable=True))
        batch_op.add_column(
            sa.Column("tag", sa.String(length=64), nullable=False, server_default="")
        )
        batch_op.add_column(sa.Column("provider_status", sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column("detail", sa.String(length=500), nullable=True))
        batch_op.add_column(
            sa.Column("running_at", column_types.UTCDateTime(timezone=True), nullable=True)
        )
        batch_op.create_index("ix_deployments_status", ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("deployments", schema=None) as batch_op:
        batch_op.drop_index("ix_deployments_status")
        batch_op.drop_column("running_at")
        batch_op.drop_column("detail")
        batch_op.drop_column("provider_status")
        batch_op.drop_column("tag")
        batch_op.drop_column("offer_id")
        batch_op.drop_column("gpu_count")
        batch_op.drop_column("gpu_model")

    op.drop_table("offer_snapshots")
