"""holds' and webhook deliveries' status columns hold only their states, like the others

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02 22:00:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a migration says what the schema was at its revision.
HOLD_STATES = ("open", "released", "debited")
DELIVERY_STATES = ("pending", "succeeded", "failed")


def _among(states: tuple[str, ...]) -> str:
    return f"status IN ({', '.join(repr(s) for s in states)})"


def upgrade() -> None:
    with op.batch_alter_table("holds") as batch:
        batch.create_check_constraint("hold_status", _among(HOLD_STATES))
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.create_check_constraint("delivery_status", _among(DELIVERY_STATES))


def downgrade() -> None:
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.drop_constraint("delivery_status", type_="check")
    with op.batch_alter_table("holds") as batch:
        batch.drop_constraint("hold_status", type_="check")
