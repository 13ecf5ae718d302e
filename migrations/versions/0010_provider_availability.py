"""providers: which of an order's providers this service cannot deploy on, our balance at each
provider as last read, and the event kinds for those and for what a dry run would have deployed

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30 22:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.storage import types as column_types

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a migration says what the schema was at its revision.
OLD_EVENT_KINDS = (
    "placed", "cancelled", "expired", "create_sent", "deployed", "running", "no_capacity",
    "rate_limited", "provider_funds", "provider_auth", "provider_unavailable", "rejected",
    "outcome_unknown", "outcome_ambiguous", "adopted", "not_created", "vm_failed", "above_max",
    "short_of_funds",
)  # fmt: skip
NEW_EVENT_KINDS = (*OLD_EVENT_KINDS, "providers_disabled", "would_deploy")


def _allowed(values: Sequence[str]) -> str:
    return f"kind IN ({', '.join(repr(v) for v in values)})"


def _event_kinds(values: Sequence[str]) -> None:
    with op.batch_alter_table("order_events", schema=None) as batch_op:
        batch_op.drop_constraint("order_event_kind", type_="check")
        batch_op.create_check_constraint("order_event_kind", _allowed(values))


def upgrade() -> None:
    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.add_column(sa.Column("disabled_providers", sa.JSON(), nullable=True))
    _event_kinds(NEW_EVENT_KINDS)
    op.create_table(
        "provider_balances",
        sa.Column("provider", sa.String(length=20), nullable=False),
        sa.Column("amount", column_types.Money(), nullable=True),
        sa.Column("read_at", column_types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("error", sa.String(length=500), nullable=True),
        sa.PrimaryKeyConstraint("provider", name=op.f("pk_provider_balances")),
    )


def downgrade() -> None:
    op.drop_table("provider_balances")
    op.execute(
        sa.text("DELETE FROM order_events WHERE kind IN ('providers_disabled', 'would_deploy')")
    )
    _event_kinds(OLD_EVENT_KINDS)
    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.drop_column("disabled_providers")
