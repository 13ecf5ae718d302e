"""which image runs which machine, and each image's driver, kept with each provider's list

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-05 12:00:00.000000

A list read before this has none (`fits` is null): its images are checked by name alone, as
before, until the watcher's next read (at start, then hourly).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("provider_images") as batch:
        batch.add_column(sa.Column("fits", sa.JSON()))


def downgrade() -> None:
    with op.batch_alter_table("provider_images") as batch:
        batch.drop_column("fits")
