"""orders for a cluster: how many nodes, the fabric between them, what a lost node does; an
attempt's nodes and the machines its provider reports; a lost node in timelines and as a
terminate reason

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03 14:30:00.000000

Every order and attempt before this was for a single machine: nodes 1, no cluster fabric, and
a lost node (there was none to lose) keeps the order.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out, not imported: a migration says what the schema was at its revision.
MAX_NODES = 16
CLUSTER_INTERCONNECTS = ("infiniband",)
NODE_LOST_POLICIES = ("keep", "terminate")
OLD_EVENT_KINDS = (
    "placed", "cancelled", "expired", "create_sent", "deployed", "running", "no_capacity",
    "rate_limited", "provider_funds", "provider_auth", "provider_unavailable", "rejected",
    "outcome_unknown", "outcome_ambiguous", "adopted", "not_created", "vm_failed", "above_max",
    "short_of_funds", "providers_disabled", "would_deploy", "billed", "unpaid", "limits",
    "terminating", "delete_retry", "terminated", "lost",
)  # fmt: skip
NEW_EVENT_KINDS = (*OLD_EVENT_KINDS, "node_lost")
OLD_TERMINATE_REASONS = ("requested", "admin", "unpaid", "max_runtime", "max_total")
NEW_TERMINATE_REASONS = (*OLD_TERMINATE_REASONS, "node_lost")


def _one_of(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _checks(kinds: Sequence[str], reasons: Sequence[str]) -> None:
    for table, column, name, values in (
        ("order_events", "kind", "order_event_kind", kinds),
        ("orders", "terminate_reason", "terminate_reason", reasons),
    ):
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(name, type_="check")
            batch.create_check_constraint(name, _one_of(column, values))


def upgrade() -> None:
    _checks(NEW_EVENT_KINDS, NEW_TERMINATE_REASONS)
    with op.batch_alter_table("orders") as batch:
        batch.add_column(
            sa.Column("nodes", sa.Integer(), nullable=False, server_default=sa.text("1"))
        )
        batch.add_column(sa.Column("cluster_interconnect", sa.String(length=20)))
        batch.add_column(
            sa.Column(
                "on_node_lost",
                sa.String(length=20),
                nullable=False,
                server_default=sa.text("'keep'"),
            )
        )
        batch.create_check_constraint("order_nodes", f"nodes BETWEEN 1 AND {MAX_NODES}")
        batch.create_check_constraint(
            "order_cluster_interconnect",
            _one_of("cluster_interconnect", CLUSTER_INTERCONNECTS),
        )
        batch.create_check_constraint(
            "order_on_node_lost", _one_of("on_node_lost", NODE_LOST_POLICIES)
        )
    with op.batch_alter_table("deployments") as batch:
        batch.add_column(
            sa.Column("nodes", sa.Integer(), nullable=False, server_default=sa.text("1"))
        )
        batch.add_column(sa.Column("machines", sa.JSON()))


def downgrade() -> None:
    op.execute(sa.text("DELETE FROM order_events WHERE kind = 'node_lost'"))
    op.execute(
        sa.text(
            "UPDATE orders SET terminate_reason = 'requested' WHERE terminate_reason = 'node_lost'"
        )
    )
    _checks(OLD_EVENT_KINDS, OLD_TERMINATE_REASONS)
    with op.batch_alter_table("deployments") as batch:
        batch.drop_column("machines")
        batch.drop_column("nodes")
    with op.batch_alter_table("orders") as batch:
        batch.drop_constraint("order_on_node_lost", type_="check")
        batch.drop_constraint("order_cluster_interconnect", type_="check")
        batch.drop_constraint("order_nodes", type_="check")
        batch.drop_column("on_node_lost")
        batch.drop_column("cluster_interconnect")
        batch.drop_column("nodes")
