"""offer snapshots keep what is left of each provider's tightest rate-limit bucket

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01 07:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("offer_snapshots") as batch:
        batch.add_column(sa.Column("rate_limit_remaining", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("offer_snapshots") as batch:
        batch.drop_column("rate_limit_remaining")
