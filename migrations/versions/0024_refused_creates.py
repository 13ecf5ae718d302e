"""a create refused without a reason the adapter can tell: a timeline kind of its own

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-05 10:00:00.000000

Such a refusal used to fail the order (`rejected`); now the order waits and its timeline says
what the provider answered (`refused`).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a migration says what the schema was at its revision.
OLD_EVENT_KINDS = (
    "placed", "cancelled", "expired", "create_sent", "deployed", "running", "no_capacity",
    "rate_limited", "provider_funds", "provider_auth", "provider_unavailable", "rejected",
    "outcome_unknown", "outcome_ambiguous", "adopted", "not_created", "vm_failed", "above_max",
    "short_of_funds", "providers_disabled", "would_deploy", "billed", "unpaid", "limits",
    "terminating", "delete_retry", "terminated", "lost", "node_lost",
)  # fmt: skip
NEW_EVENT_KINDS = (*OLD_EVENT_KINDS, "refused")


def _check(kinds: Sequence[str]) -> None:
    with op.batch_alter_table("order_events") as batch:
        batch.drop_constraint("order_event_kind", type_="check")
        batch.create_check_constraint(
            "order_event_kind", f"kind IN ({', '.join(repr(k) for k in kinds)})"
        )


def upgrade() -> None:
    _check(NEW_EVENT_KINDS)


def downgrade() -> None:
    op.execute(sa.text("DELETE FROM order_events WHERE kind = 'refused'"))
    _check(OLD_EVENT_KINDS)
