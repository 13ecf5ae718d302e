"""an order's OS image, and each provider's image list as last read

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03 20:30:00.000000

Every order before this boots the configured image: `image` is null. The image lists are read
by the watcher; until its first read the table is empty and an order's image is not checked.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.storage import types as column_types

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("orders") as batch:
        batch.add_column(sa.Column("image", sa.String(length=200)))
    op.create_table(
        "provider_images",
        sa.Column("provider", sa.String(length=20), nullable=False),
        sa.Column("machines", sa.JSON(), nullable=False),
        sa.Column("clusters", sa.JSON(), nullable=False),
        sa.Column("read_at", column_types.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("provider", name=op.f("pk_provider_images")),
    )


def downgrade() -> None:
    op.drop_table("provider_images")
    with op.batch_alter_table("orders") as batch:
        batch.drop_column("image")
