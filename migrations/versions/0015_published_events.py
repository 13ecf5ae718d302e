"""the event stream: timeline lines and account events, numbered in commit order

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SOURCES = ("order_events", "account_events")


def upgrade() -> None:
    for table in SOURCES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column("published", sa.Boolean(), nullable=False, server_default=sa.false())
            )
        # What happened before the stream existed is in the timelines, not replayed to streams.
        op.execute(sa.text(f"UPDATE {table} SET published = true"))
        op.create_index(
            f"ix_{table}_unpublished",
            table,
            ["id"],
            sqlite_where=sa.text("NOT published"),
            postgresql_where=sa.text("NOT published"),
        )
    op.create_table(
        "published_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("account_id", sa.String(40), nullable=False),
        sa.Column("order_id", sa.String(40), nullable=True),
        sa.Column("type", sa.String(60), nullable=False),
        sa.Column("source_id", sa.String(40), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name="fk_published_events_account_id_accounts",
        ),
        sa.ForeignKeyConstraint(
            ["order_id"], ["orders.id"], name="fk_published_events_order_id_orders"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_published_events"),
        sa.UniqueConstraint("source_id", name="uq_published_events_source_id"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_published_events_account_id_id", "published_events", ["account_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_published_events_account_id_id", table_name="published_events")
    op.drop_table("published_events")
    for table in SOURCES:
        op.drop_index(f"ix_{table}_unpublished", table_name=table)
        with op.batch_alter_table(table) as batch:
            batch.drop_column("published")
