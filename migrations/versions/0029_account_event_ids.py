"""event ids of each account's own: account_seq on the stream, a counter per account

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-07 14:00:00.000000

The stream showed the platform-wide row id: one account's ids jumped by everyone else's events,
and the 400 for a future id told anyone the newest id of all. Readers now see `account_seq`,
numbered per account in the same order; `event_counters` keeps the last one given so a pruned
id is never given again. Events already published are numbered in their id order.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "event_counters",
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"]),
        sa.PrimaryKeyConstraint("account_id"),
    )
    with op.batch_alter_table("published_events") as batch:
        batch.add_column(sa.Column("account_seq", sa.BigInteger(), nullable=True))
    op.execute(
        sa.text(
            "UPDATE published_events SET account_seq = numbered.seq FROM ("
            " SELECT id, ROW_NUMBER() OVER (PARTITION BY account_id ORDER BY id) AS seq"
            " FROM published_events) AS numbered WHERE published_events.id = numbered.id"
        )
    )
    op.execute(
        sa.text(
            "INSERT INTO event_counters (account_id, last_seq)"
            " SELECT account_id, MAX(account_seq) FROM published_events GROUP BY account_id"
        )
    )
    # Recreated on SQLite to make the column NOT NULL; AUTOINCREMENT kept with it.
    with op.batch_alter_table(
        "published_events", table_kwargs={"sqlite_autoincrement": True}
    ) as batch:
        batch.alter_column("account_seq", existing_type=sa.BigInteger(), nullable=False)
        batch.create_unique_constraint(
            "uq_published_events_account_seq", ["account_id", "account_seq"]
        )


def downgrade() -> None:
    with op.batch_alter_table(
        "published_events", table_kwargs={"sqlite_autoincrement": True}
    ) as batch:
        batch.drop_constraint("uq_published_events_account_seq", type_="unique")
        batch.drop_column("account_seq")
    op.drop_table("event_counters")
