"""a deployed VM shown in a status nobody knows: a timeline kind of its own

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-07 10:00:00.000000

The follower used to wait on such a VM in silence; now its timeline says so once per status
(`status_unknown`), and a single machine not running by its provider's boot deadline is deleted.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a migration says what the schema was at its revision.
OLD_EVENT_KINDS = (
    "placed", "cancelled", "expired", "create_sent", "deployed", "running", "no_capacity",
    "rate_limited", "provider_funds", "provider_auth", "provider_unavailable", "rejected",
    "outcome_unknown", "outcome_ambiguous", "adopted", "not_created", "vm_failed", "above_max",
    "short_of_funds", "providers_disabled", "would_deploy", "billed", "unpaid", "limits",
    "terminating", "delete_retry", "terminated", "lost", "node_lost", "refused",
)  # fmt: skip
NEW_EVENT_KINDS = (*OLD_EVENT_KINDS, "status_unknown")


def _check(kinds: Sequence[str]) -> None:
    with op.batch_alter_table("order_events") as batch:
        batch.drop_constraint("order_event_kind", type_="check")
        batch.create_check_constraint(
            "order_event_kind", f"kind IN ({', '.join(repr(k) for k in kinds)})"
        )


def upgrade() -> None:
    _check(NEW_EVENT_KINDS)


def downgrade() -> None:
    op.execute(sa.text("DELETE FROM order_events WHERE kind = 'status_unknown'"))
    _check(OLD_EVENT_KINDS)
