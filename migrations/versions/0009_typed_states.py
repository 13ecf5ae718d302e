"""typed states: order and attempt statuses and event kinds are checked by the database

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30 19:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a migration says what the schema was at its revision.
ORDER_STATUSES = ("waiting", "deploying", "deployed", "running", "cancelled", "expired", "failed")
DEPLOYMENT_STATUSES = ("creating", "unknown", "deployed", "running", "not_created", "failed")
EVENT_KINDS = (
    "placed", "cancelled", "expired", "create_sent", "deployed", "running", "no_capacity",
    "rate_limited", "provider_funds", "provider_auth", "provider_unavailable", "rejected",
    "outcome_unknown", "outcome_ambiguous", "adopted", "not_created", "vm_failed", "above_max",
    "short_of_funds",
)  # fmt: skip
CHECKS = (
    ("orders", "status", "order_status", ORDER_STATUSES),
    ("deployments", "status", "deployment_status", DEPLOYMENT_STATUSES),
    ("order_events", "kind", "order_event_kind", EVENT_KINDS),
)


def _allowed(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    connection = op.get_bind()
    for table, column, _name, values in CHECKS:
        unknown = connection.execute(
            sa.text(f"SELECT DISTINCT {column} FROM {table} WHERE NOT ({_allowed(column, values)})")
        ).scalars()
        found = sorted(unknown)
        if found:
            raise RuntimeError(f"{table}.{column} holds values this version does not know: {found}")
    for table, column, name, values in CHECKS:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.create_check_constraint(name, _allowed(column, values))


def downgrade() -> None:
    for table, _column, name, _values in CHECKS:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(name, type_="check")
