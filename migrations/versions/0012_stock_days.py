"""stock days: closed stock by offer key and UTC day, so that long windows read few rows

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 00:00:00.000000
"""

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op

# The packing of `stock_days.spans` is part of this schema; a change to it needs a migration.
from app.stock.days import cut, encode
from app.storage import types as column_types

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MACHINE = ("gpu_model", "gpu_count", "interconnect", "disk_gb", "disk_fixed")


def upgrade() -> None:
    stock_days = op.create_table(
        "stock_days",
        sa.Column("provider", sa.String(length=20), nullable=False),
        sa.Column("region", sa.String(length=64), nullable=False),
        sa.Column("sku", sa.String(length=128), nullable=False),
        sa.Column("day", sa.Integer(), nullable=False),
        sa.Column("generated", sa.Boolean(), nullable=False),
        sa.Column("gpu_model", sa.String(length=40), nullable=False),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("interconnect", sa.String(length=20), nullable=True),
        sa.Column("disk_gb", sa.Integer(), nullable=True),
        sa.Column("disk_fixed", sa.Boolean(), nullable=False),
        sa.Column("last_seen_at", column_types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("spans", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint(
            "provider", "region", "sku", "day", "generated", name=op.f("pk_stock_days")
        ),
    )
    op.create_index("ix_stock_days_machine_day", "stock_days", ["gpu_model", "gpu_count", "day"])
    _fill(stock_days)


def _fill(stock_days: sa.Table) -> None:
    """Every closed interval already recorded joins its days."""
    intervals = sa.table(
        "stock_intervals",
        *(sa.column(name) for name in ("provider", "region", "sku", *MACHINE, "generated")),
        sa.column("price_per_hour", sa.BigInteger()),  # micro-dollars as stored
        sa.column("first_seen_at", column_types.UTCDateTime()),
        sa.column("last_seen_at", column_types.UTCDateTime()),
        sa.column("gone_at", column_types.UTCDateTime()),
    )
    Key = tuple[str, str, str, int, bool]
    days: dict[Key, dict[str, object]] = {}
    last_seen: dict[Key, datetime] = {}
    pieces: dict[Key, list[tuple[float, float, float]]] = {}
    rows = op.get_bind().execute(sa.select(intervals).where(intervals.c.gone_at.is_not(None)))
    for row in rows.mappings():
        for day, start, end in cut(row["first_seen_at"], row["gone_at"]):
            key = (row["provider"], row["region"], row["sku"], day, bool(row["generated"]))
            days.setdefault(key, {name: row[name] for name in MACHINE})
            last_seen[key] = max(last_seen.get(key, row["last_seen_at"]), row["last_seen_at"])
            pieces.setdefault(key, []).append((start, end, float(row["price_per_hour"])))
    inserts = [
        {
            "provider": provider,
            "region": region,
            "sku": sku,
            "day": day,
            "generated": generated,
            **machine,
            "last_seen_at": last_seen[(provider, region, sku, day, generated)],
            "spans": encode(pieces[(provider, region, sku, day, generated)]),
        }
        for (provider, region, sku, day, generated), machine in days.items()
    ]
    for start in range(0, len(inserts), 2_000):
        op.bulk_insert(stock_days, inserts[start : start + 2_000])


def downgrade() -> None:
    op.drop_table("stock_days")
