"""stock forecasts: what each provider last said it plans to have, per region and GPU model

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-05 10:00:00.000000

Hyperstack's stock answer carries `planned_7_days` and `planned_30_days` per region and GPU
model. The watcher's lease holder keeps the latest per (provider, region, the provider's GPU
name), rewritten only when it changes.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.storage import types as column_types

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "stock_forecasts",
        sa.Column("provider", sa.String(length=20), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("provider_model", sa.String(length=64), nullable=False),
        sa.Column("gpu_model", sa.String(length=40), nullable=False),
        sa.Column("interconnect", sa.String(length=20), nullable=True),
        sa.Column("within_7_days", sa.String(length=40), nullable=True),
        sa.Column("within_30_days", sa.String(length=40), nullable=True),
        sa.Column("changed_at", column_types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(
            "provider", "region", "provider_model", name=op.f("pk_stock_forecasts")
        ),
    )


def downgrade() -> None:
    op.drop_table("stock_forecasts")
