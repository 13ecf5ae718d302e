"""one owner per VM, and one open attempt per kind where VMs have no name

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30 18:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPEN = "status IN ('creating', 'unknown')"
LIVE = "status IN ('deployed', 'running')"
ONE_OWNER = sa.text(f"provider_vm_id IS NOT NULL AND {LIVE}")
ONE_OPEN = sa.text(f"serial_kind IS NOT NULL AND {OPEN}")


def upgrade() -> None:
    connection = op.get_bind()
    shared = connection.execute(
        sa.text(
            "SELECT provider, provider_vm_id, COUNT(*) FROM deployments "
            f"WHERE provider_vm_id IS NOT NULL AND {LIVE} "
            "GROUP BY provider, provider_vm_id HAVING COUNT(*) > 1"
        )
    ).all()
    if shared:
        # Which order really owns such a VM cannot be told from the tables; guessing would
        # charge someone for a machine they do not get.
        listed = "; ".join(f"{provider} VM {vm_id} ({n} attempts)" for provider, vm_id, n in shared)
        raise RuntimeError(
            "cannot add the one-owner-per-VM rule: these VMs are recorded as deployed or running "
            f"for more than one order: {listed}. Find out which order each VM belongs to, set the "
            "other attempts' status to 'failed' and refund those orders, then migrate again."
        )

    with op.batch_alter_table("deployments", schema=None) as batch_op:
        batch_op.add_column(sa.Column("serial_kind", sa.String(length=200), nullable=True))

    # QuantaCloud's attempts get their kind; of attempts left open by the previous version, only
    # the oldest of each kind (the resolver waits for the others without the index's help).
    rows = connection.execute(
        sa.text(
            "SELECT id, region, instance_type, status FROM deployments "
            "WHERE provider = 'quantacloud' ORDER BY created_at, id"
        )
    ).all()
    open_kinds: set[str] = set()
    for deployment_id, region, sku, status in rows:
        kind = f"{region}/{sku}"
        if status in ("creating", "unknown"):
            if kind in open_kinds:
                continue
            open_kinds.add(kind)
        connection.execute(
            sa.text("UPDATE deployments SET serial_kind = :kind WHERE id = :id"),
            {"kind": kind, "id": deployment_id},
        )

    op.create_index(
        "uq_deployments_live_provider_vm",
        "deployments",
        ["provider", "provider_vm_id"],
        unique=True,
        sqlite_where=ONE_OWNER,
        postgresql_where=ONE_OWNER,
    )
    op.create_index(
        "uq_deployments_open_serial_kind",
        "deployments",
        ["provider", "serial_kind"],
        unique=True,
        sqlite_where=ONE_OPEN,
        postgresql_where=ONE_OPEN,
    )


def downgrade() -> None:
    op.drop_index("uq_deployments_open_serial_kind", table_name="deployments")
    op.drop_index("uq_deployments_live_provider_vm", table_name="deployments")
    with op.batch_alter_table("deployments", schema=None) as batch_op:
        batch_op.drop_column("serial_kind")
