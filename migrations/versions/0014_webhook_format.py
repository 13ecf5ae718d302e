"""webhook endpoints get a format: standard, or a message Slack or Discord shows

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a migration says what the schema was at its revision.
FORMATS = ("standard", "slack", "discord")


def upgrade() -> None:
    with op.batch_alter_table("webhook_endpoints") as batch:
        batch.add_column(
            sa.Column("format", sa.String(20), nullable=False, server_default="standard")
        )
        batch.create_check_constraint(
            "webhook_format", f"format IN ({', '.join(repr(f) for f in FORMATS)})"
        )


def downgrade() -> None:
    with op.batch_alter_table("webhook_endpoints") as batch:
        batch.drop_constraint("webhook_format", type_="check")
        batch.drop_column("format")
