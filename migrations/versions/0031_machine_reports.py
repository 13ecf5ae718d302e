"""machine reports: a token per create attempt, and the stage its machine last reported

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-07 23:00:00.000000

A machine whose order runs a start-up script reports how far it got (booted, downloading, the
engine healthy, ready or failed) with a token of its own attempt. Only the token's SHA-256 is
kept, unique, so a report finds its attempt and a database read gives no one a token; attempts
made before this have none and take no reports. A stage the machine moves to is a line of
its order's timeline (`machine_report`; `machine_ready` and `machine_failed` for the last).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.storage import types as column_types

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a migration says what the schema was at its revision.
OLD_EVENT_KINDS = (
    "placed", "cancelled", "expired", "create_sent", "deployed", "running", "no_capacity",
    "rate_limited", "provider_funds", "provider_auth", "provider_unavailable", "rejected",
    "outcome_unknown", "outcome_ambiguous", "adopted", "not_created", "vm_failed", "above_max",
    "short_of_funds", "providers_disabled", "would_deploy", "billed", "unpaid", "limits",
    "terminating", "delete_retry", "terminated", "lost", "node_lost", "refused",
    "status_unknown",
)  # fmt: skip
NEW_EVENT_KINDS = (
    *OLD_EVENT_KINDS, "machine_report", "machine_ready", "machine_failed", "no_reports"
)  # fmt: skip


def _check(kinds: Sequence[str]) -> None:
    with op.batch_alter_table("order_events") as batch:
        batch.drop_constraint("order_event_kind", type_="check")
        batch.create_check_constraint(
            "order_event_kind", f"kind IN ({', '.join(repr(k) for k in kinds)})"
        )


def upgrade() -> None:
    with op.batch_alter_table("deployments") as batch:
        batch.add_column(sa.Column("report_token_sha256", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("stage", sa.String(length=20), nullable=True))
        batch.add_column(sa.Column("stage_detail", sa.String(length=500), nullable=True))
        batch.add_column(sa.Column("progress", sa.JSON(), nullable=True))
        batch.add_column(
            sa.Column("reported_at", column_types.UTCDateTime(timezone=True), nullable=True)
        )
        batch.add_column(
            sa.Column("ready_at", column_types.UTCDateTime(timezone=True), nullable=True)
        )
        batch.add_column(sa.Column("time_to_first_token_seconds", sa.Float(), nullable=True))
        batch.create_index("uq_deployments_report_token", ["report_token_sha256"], unique=True)
    _check(NEW_EVENT_KINDS)


def downgrade() -> None:
    op.execute(
        sa.text("DELETE FROM order_events WHERE kind LIKE 'machine_%' OR kind = 'no_reports'")
    )
    _check(OLD_EVENT_KINDS)
    with op.batch_alter_table("deployments") as batch:
        batch.drop_index("uq_deployments_report_token")
        for column in (
            "time_to_first_token_seconds",
            "ready_at",
            "reported_at",
            "progress",
            "stage_detail",
            "stage",
            "report_token_sha256",
        ):
            batch.drop_column(column)
