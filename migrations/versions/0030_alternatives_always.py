"""an order's machines are always its alternatives: a list of one for one machine

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-07 16:00:00.000000

`orders.alternatives` held the order's machines only when it listed more than one, so every
reader asked whether it had any. Orders of one machine now list it too, from their machine
columns (which stay: they are the first alternative, indexed for the matcher), and the column
is NOT NULL. Downgrading empties the lists of one again.
"""

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from alembic import op

from app.storage import types as column_types

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 1000
CENT = Decimal("0.01")  # prices as placed (45.00), not as read back (45)
orders = sa.table(
    "orders",
    sa.column("id", sa.String),
    sa.column("gpu_model", sa.String),
    sa.column("gpu_count", sa.Integer),
    sa.column("nodes", sa.Integer),
    sa.column("providers", sa.JSON),
    sa.column("max_price_per_hour", column_types.Money),
    sa.column("regions", sa.JSON),
    sa.column("min_disk_gb", sa.Integer),
    sa.column("interconnect", sa.String),
    sa.column("cluster_interconnect", sa.String),
    sa.column("alternatives", sa.JSON),
)


def _stored(row: Any) -> list[dict[str, Any]]:
    """The order's one machine, as placing stores an alternative."""
    price: Decimal = row.max_price_per_hour
    cents = price.quantize(CENT)
    return [
        {
            "gpu_model": row.gpu_model,
            "gpu_count": row.gpu_count,
            "nodes": row.nodes,
            "providers": list(row.providers),
            "max_price_per_hour": str(cents if cents == price else price),
            "regions": row.regions,
            "min_disk_gb": row.min_disk_gb,
            "interconnect": row.interconnect,
            "cluster_interconnect": row.cluster_interconnect,
        }
    ]


def _none(column: Any) -> Any:
    """SQL NULL, or the JSON `null` the ORM wrote for None."""
    return sa.or_(column.is_(None), sa.cast(column, sa.Text) == "null")


def upgrade() -> None:
    connection = op.get_bind()
    after = ""
    while True:
        rows = connection.execute(
            sa.select(orders)
            .where(_none(orders.c.alternatives), orders.c.id > after)
            .order_by(orders.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            break
        connection.execute(
            orders.update()
            .where(orders.c.id == sa.bindparam("order_id"))
            .values(alternatives=sa.bindparam("listed")),
            [{"order_id": row.id, "listed": _stored(row)} for row in rows],
        )
        after = rows[-1].id
    with op.batch_alter_table("orders") as batch:
        batch.alter_column("alternatives", existing_type=sa.JSON(), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("orders") as batch:
        batch.alter_column("alternatives", existing_type=sa.JSON(), nullable=True)
    connection = op.get_bind()
    connection.execute(
        orders.update()
        .where(sa.func.json_array_length(orders.c.alternatives) == 1)
        .values(alternatives=sa.null())
    )
