"""after the deploy: terminating, terminated and lost; billing hours paid as a machine runs;
the limits an order sets; the low-balance mark of an account

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02 09:00:00.000000

Machines already running when this runs have paid their first hour and nothing more; they pay
from now on (their first hour is taken to begin now), not for the hours they ran before this
version billed them.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.storage import types as column_types

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a migration says what the schema was at its revision.
OLD_ORDER_STATUSES = (
    "waiting", "deploying", "deployed", "running", "cancelled", "expired", "failed",
)  # fmt: skip
NEW_ORDER_STATUSES = (*OLD_ORDER_STATUSES, "terminating", "terminated", "lost")
OLD_DEPLOYMENT_STATUSES = ("creating", "unknown", "deployed", "running", "not_created", "failed")
NEW_DEPLOYMENT_STATUSES = (*OLD_DEPLOYMENT_STATUSES, "terminating", "terminated", "lost")
OLD_EVENT_KINDS = (
    "placed", "cancelled", "expired", "create_sent", "deployed", "running", "no_capacity",
    "rate_limited", "provider_funds", "provider_auth", "provider_unavailable", "rejected",
    "outcome_unknown", "outcome_ambiguous", "adopted", "not_created", "vm_failed", "above_max",
    "short_of_funds", "providers_disabled", "would_deploy",
)  # fmt: skip
NEW_EVENT_KINDS = (
    *OLD_EVENT_KINDS, "billed", "unpaid", "limits", "terminating", "delete_retry", "terminated",
    "lost",
)  # fmt: skip
TERMINATE_REASONS = ("requested", "admin", "unpaid", "max_runtime", "max_total")
OLD_OWNER = "provider_vm_id IS NOT NULL AND status IN ('deployed', 'running')"
NEW_OWNER = "provider_vm_id IS NOT NULL AND status IN ('deployed', 'running', 'terminating')"
BILLED_HOUR = "billing_hour IS NOT NULL"
REFUND_OF_ATTEMPT = "deployment_id IS NOT NULL AND kind = 'refund'"


def _allowed(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _checks(orders: Sequence[str], deployments: Sequence[str], kinds: Sequence[str]) -> None:
    for table, column, name, values in (
        ("orders", "status", "order_status", orders),
        ("deployments", "status", "deployment_status", deployments),
        ("order_events", "kind", "order_event_kind", kinds),
    ):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(name, type_="check")
            batch_op.create_check_constraint(name, _allowed(column, values))


def _owner_index(where: str) -> None:
    op.drop_index("uq_deployments_live_provider_vm", table_name="deployments")
    op.create_index(
        "uq_deployments_live_provider_vm",
        "deployments",
        ["provider", "provider_vm_id"],
        unique=True,
        sqlite_where=sa.text(where),
        postgresql_where=sa.text(where),
    )


def upgrade() -> None:
    _checks(NEW_ORDER_STATUSES, NEW_DEPLOYMENT_STATUSES, NEW_EVENT_KINDS)
    _owner_index(NEW_OWNER)
    with op.batch_alter_table("accounts", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("low_balance_since", column_types.UTCDateTime(timezone=True), nullable=True)
        )
    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.add_column(sa.Column("max_runtime_hours", column_types.Money(), nullable=True))
        batch_op.add_column(sa.Column("max_total_usd", column_types.Money(), nullable=True))
        batch_op.add_column(sa.Column("terminate_reason", sa.String(length=20), nullable=True))
        batch_op.add_column(
            sa.Column(
                "terminate_requested_at",
                column_types.UTCDateTime(timezone=True),
                nullable=True,
            )
        )
        batch_op.create_check_constraint(
            "terminate_reason", _allowed("terminate_reason", TERMINATE_REASONS)
        )
    with op.batch_alter_table("deployments", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "billing_hour_seconds", sa.Float(), nullable=False, server_default=sa.text("3600")
            )
        )
        batch_op.add_column(
            sa.Column("billed_from", column_types.UTCDateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(
            sa.Column("paid_hours", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
        batch_op.add_column(
            sa.Column("charged", column_types.Money(), nullable=False, server_default=sa.text("0"))
        )
        batch_op.add_column(
            sa.Column("unpaid_since", column_types.UTCDateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(
            sa.Column("ended_at", column_types.UTCDateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(
            sa.Column("delete_attempts", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
        batch_op.add_column(
            sa.Column("next_delete_at", column_types.UTCDateTime(timezone=True), nullable=True)
        )
    # What the previous version charged: one hour for each accepted attempt whose VM did not
    # fail (those were refunded). Running ones bill from now on.
    op.execute(
        sa.text(
            "UPDATE deployments SET paid_hours = 1, charged = price_per_hour_with_fees "
            "WHERE status IN ('deployed', 'running')"
        )
    )
    op.execute(
        sa.text("UPDATE deployments SET billed_from = CURRENT_TIMESTAMP WHERE status = 'running'")
    )
    with op.batch_alter_table("ledger_entries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("deployment_id", sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column("billing_hour", sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            "fk_ledger_entries_deployment_id_deployments",
            "deployments",
            ["deployment_id"],
            ["id"],
        )
    op.create_index(
        "uq_ledger_entries_billed_hour",
        "ledger_entries",
        ["deployment_id", "billing_hour"],
        unique=True,
        sqlite_where=sa.text(BILLED_HOUR),
        postgresql_where=sa.text(BILLED_HOUR),
    )
    op.create_index(
        "uq_ledger_entries_attempt_refund",
        "ledger_entries",
        ["deployment_id"],
        unique=True,
        sqlite_where=sa.text(REFUND_OF_ATTEMPT),
        postgresql_where=sa.text(REFUND_OF_ATTEMPT),
    )


def downgrade() -> None:
    connection = op.get_bind()
    after = connection.execute(
        sa.text("SELECT COUNT(*) FROM orders WHERE status IN ('terminating', 'terminated', 'lost')")
    ).scalar_one()
    if after:
        raise RuntimeError(
            f"{after} orders are terminating, terminated or lost: the previous version has no "
            "such states (and would leave their machines unbilled or undeleted)"
        )
    op.drop_index("uq_ledger_entries_attempt_refund", table_name="ledger_entries")
    op.drop_index("uq_ledger_entries_billed_hour", table_name="ledger_entries")
    with op.batch_alter_table("ledger_entries", schema=None) as batch_op:
        batch_op.drop_constraint("fk_ledger_entries_deployment_id_deployments", type_="foreignkey")
        batch_op.drop_column("billing_hour")
        batch_op.drop_column("deployment_id")
    with op.batch_alter_table("deployments", schema=None) as batch_op:
        for column in (
            "next_delete_at",
            "delete_attempts",
            "ended_at",
            "unpaid_since",
            "charged",
            "paid_hours",
            "billed_from",
            "billing_hour_seconds",
        ):
            batch_op.drop_column(column)
    with op.batch_alter_table("orders", schema=None) as batch_op:
        batch_op.drop_constraint("terminate_reason", type_="check")
        for column in (
            "terminate_requested_at",
            "terminate_reason",
            "max_total_usd",
            "max_runtime_hours",
        ):
            batch_op.drop_column(column)
    with op.batch_alter_table("accounts", schema=None) as batch_op:
        batch_op.drop_column("low_balance_since")
    op.execute(
        sa.text(
            "DELETE FROM order_events WHERE kind IN ('billed', 'unpaid', 'limits', "
            "'terminating', 'delete_retry', 'terminated', 'lost')"
        )
    )
    _owner_index(OLD_OWNER)
    _checks(OLD_ORDER_STATUSES, OLD_DEPLOYMENT_STATUSES, OLD_EVENT_KINDS)
