"""stock history: one interval per appearance of an offer, and when each provider was read

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-30 22:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.storage import types as column_types

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "stock_intervals",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("provider", sa.String(length=20), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("sku", sa.String(length=128), nullable=False),
        sa.Column("gpu_model", sa.String(length=40), nullable=False),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("interconnect", sa.String(length=20), nullable=True),
        sa.Column("disk_gb", sa.Integer(), nullable=True),
        sa.Column("disk_fixed", sa.Boolean(), nullable=False),
        sa.Column("price_per_hour", column_types.Money(), nullable=False),
        sa.Column("fee_percent", column_types.Money(), nullable=False),
        sa.Column("fee_flat_per_hour", column_types.Money(), nullable=False),
        sa.Column("price_per_hour_with_fees", column_types.Money(), nullable=False),
        sa.Column("first_seen_at", column_types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", column_types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("gone_at", column_types.UTCDateTime(timezone=True), nullable=True),
        sa.Column("max_available", sa.Integer(), nullable=True),
        sa.Column("generated", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stock_intervals")),
    )
    op.create_index(
        "ix_stock_intervals_machine_first_seen",
        "stock_intervals",
        ["gpu_model", "gpu_count", "first_seen_at"],
    )
    op.create_index("ix_stock_intervals_last_seen", "stock_intervals", ["last_seen_at"])
    op.create_index(
        "uq_stock_intervals_open_offer",
        "stock_intervals",
        ["provider", "region", "sku"],
        unique=True,
        sqlite_where=sa.text("gone_at IS NULL"),
        postgresql_where=sa.text("gone_at IS NULL"),
    )
    op.create_table(
        "stock_coverage",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("provider", sa.String(length=20), nullable=False),
        sa.Column("period_seconds", sa.Float(), nullable=False),
        sa.Column("started_at", column_types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("last_read_at", column_types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("ended_at", column_types.UTCDateTime(timezone=True), nullable=True),
        sa.Column("generated", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stock_coverage")),
    )
    op.create_index(
        "ix_stock_coverage_provider_started", "stock_coverage", ["provider", "started_at"]
    )
    op.create_index(
        "uq_stock_coverage_open_provider",
        "stock_coverage",
        ["provider"],
        unique=True,
        sqlite_where=sa.text("ended_at IS NULL"),
        postgresql_where=sa.text("ended_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_table("stock_coverage")
    op.drop_table("stock_intervals")
