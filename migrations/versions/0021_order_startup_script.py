"""an order's start-up script: sealed at rest, with its SHA-256 and size to show

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03 18:00:00.000000

Every order before this had no script: the three columns are null.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("orders") as batch:
        batch.add_column(sa.Column("startup_script", sa.Text()))
        batch.add_column(sa.Column("startup_script_sha256", sa.String(length=64)))
        batch.add_column(sa.Column("startup_script_bytes", sa.Integer()))


def downgrade() -> None:
    with op.batch_alter_table("orders") as batch:
        batch.drop_column("startup_script_bytes")
        batch.drop_column("startup_script_sha256")
        batch.drop_column("startup_script")
