"""What the client commands print for people (Rich tables and lines) and for scripts (JSON).

Everything shown comes from the API's JSON; amounts are read as Decimal, never float, and text
from the service is never read as Rich markup.
"""

import json
import sys
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from rich.console import Console
from rich.table import Table

PIPE_WIDTH = 1000  # printed into a pipe or file: no terminal to fit, so lines stay whole


def console() -> Console:
    """A console on stdout that prints text as it is (no markup, no highlighting)."""
    out = Console(markup=False, highlight=False, emoji=False)
    if not out.is_terminal:
        out.width = PIPE_WIDTH
    return out


def emit_json(value: Any) -> None:
    """One JSON document on one line of stdout (an answer's text, or a value to encode)."""
    text = value.strip() if isinstance(value, str) else json.dumps(value)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def usd(amount: Any) -> str:
    """An amount from the API (a decimal string) as `$1,234.50`; never through float."""
    if amount is None:
        return "-"
    try:
        value = Decimal(str(amount))
    except InvalidOperation:
        return str(amount)
    return f"-${-value:,}" if value < 0 else f"${value:,}"


def when(timestamp: Any) -> str:
    """An API timestamp as `2026-11-29 14:23:55Z` (UTC, to the second)."""
    if not timestamp:
        return "-"
    try:
        moment = datetime.fromisoformat(str(timestamp)).astimezone(UTC)
    except ValueError:
        return str(timestamp)
    return moment.strftime("%Y-%m-%d %H:%M:%SZ")


def duration(seconds: int) -> str:
    """A wait in the largest two units: `2 d 3 h`, `23 h 18 min`, `5 min`, `40 s`."""
    days, rest = divmod(int(seconds), 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")]
    shown = [f"{n} {unit}" for n, unit in parts if n][:2]
    return " ".join(shown) or "0 s"


def nodes(item: dict[str, Any] | None) -> int:
    """How many machines an order, offer or deployment is (1: a single machine)."""
    count = (item or {}).get("nodes")
    return count if isinstance(count, int) and count > 0 else 1


def shape(item: dict[str, Any]) -> str:
    """An order's or offer's GPUs: `8x B300`, or `2 x 8x H200` for a cluster of two nodes."""
    gpus = f"{item.get('gpu_count')}x {item.get('gpu_model')}"
    return f"{nodes(item)} x {gpus}" if nodes(item) > 1 else gpus


def machine_wanted(order: dict[str, Any]) -> str:
    """`8x B300 on verda, hyperstack, up to $45.00/h` (`2 x 8x H200 ...` for a cluster); an
    order with alternatives: each, joined by `or`."""
    listed = order.get("alternatives") or []
    if len(listed) > 1:
        return " or ".join(machine_wanted(alternative) for alternative in listed)
    providers = ", ".join(order.get("providers") or [])
    wanted = f"{shape(order)} on {providers}"
    return f"{wanted}, up to {usd(order.get('max_price_per_hour'))}/h"


def entry_node(order: dict[str, Any]) -> str:
    """How a cluster is reached: through its `login` node (Verda's, whose nodes have inner
    addresses only), or its `first` node (nodes put together, each with its own address)."""
    inner = {m.get("ip") for m in order.get("machines") or []}
    return "login" if order.get("login_ip") and order["login_ip"] not in inner else "first"


def machine_got(deployment: dict[str, Any] | None, *, entry: str = "login") -> str:
    """`verda FIN-01 1B300.30V at $5.00/h, IP 10.0.0.5`, or `-` before there is one; a
    cluster: `verda FIN-01 16H200 (2 nodes) at $57.05/h, login IP 10.0.0.5` (`entry`:
    `entry_node`'s word for it)."""
    if not deployment:
        return "-"
    price = usd(deployment.get("price_per_hour_with_fees"))
    where = f"{deployment.get('provider')} {deployment.get('region')}"
    sku = deployment.get("instance_type")
    if nodes(deployment) > 1:
        sku = f"{sku} ({nodes(deployment)} nodes)"
    got = f"{where} {sku} at {price}/h"
    if not deployment.get("ip"):
        return got
    return f"{got}, {f'{entry} IP' if nodes(deployment) > 1 else 'IP'} {deployment['ip']}"


def cluster(order: dict[str, Any]) -> str | None:
    """What a cluster order asks of its nodes, or None for a single machine."""
    if nodes(order) == 1:
        return None
    lost = "terminate the cluster" if order.get("on_node_lost") == "terminate" else "keep the rest"
    fabric = order.get("cluster_interconnect") or "any"
    return f"{shape(order)} ({nodes(order)} nodes), fabric: {fabric}; a node lost: {lost}"


def machines(order: dict[str, Any]) -> str | None:
    """The order's machines, one line each: provider VM id, IP, state (None before any)."""
    rows = [
        (str(m.get("provider_vm_id") or "-"), str(m.get("ip") or "-"), str(m.get("state") or "-"))
        for m in order.get("machines") or []
        if isinstance(m, dict)
    ]
    if not rows:
        return None
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    return "\n".join(f"{vm:<{widths[0]}}  {ip:<{widths[1]}}  {state}" for vm, ip, state in rows)


def order_ip(order: dict[str, Any]) -> str | None:
    """The order's machine's IP, once it has one."""
    deployment = order.get("deployment") or {}
    ip = deployment.get("ip")
    return str(ip) if ip else None


def orders_table(orders: list[dict[str, Any]]) -> Table:
    """Orders, one row each: id, status, what it wants, what it got, when placed."""
    table = Table(box=None, pad_edge=False)
    table.add_column("ORDER", no_wrap=True)
    table.add_column("STATUS", no_wrap=True)
    table.add_column("WANTS")
    table.add_column("MACHINE")
    table.add_column("NAME")
    table.add_column("PLACED", no_wrap=True)
    for order in orders:
        table.add_row(
            order.get("id"),
            order.get("status"),
            machine_wanted(order),
            machine_got(order.get("deployment"), entry=entry_node(order)),
            order.get("name") or "",
            when(order.get("created_at")),
        )
    return table


def _estimate(estimate: dict[str, Any] | None) -> str | None:
    if not estimate:
        return None
    window = estimate.get("window", "")
    if estimate.get("status") != "ok":
        return f"not enough stock history ({estimate.get('missing') or 'too little data'})"
    if estimate.get("median_seconds") is not None:
        return f"typically {duration(estimate['median_seconds'])} (last {window})"
    if estimate.get("median_more_than_seconds") is not None:
        longer = duration(estimate["median_more_than_seconds"])
        return f"more than {longer} (last {window})"
    return None


def status_line(order: dict[str, Any]) -> str:
    """Where an order stands, as `watch` says it first: `ord_... is waiting (placed
    2026-12-01 09:59:00Z); expected wait: typically 4 min (last 7d)`, or what it is deploying."""
    status = order.get("status")
    line = f"{order.get('id')} is {status} (placed {when(order.get('created_at'))})"
    if status == "waiting":
        expected = _estimate(order.get("estimate"))
        return f"{line}; wants {machine_wanted(order)}; expected wait: {expected or 'unknown'}"
    return f"{line}: {machine_got(order.get('deployment'), entry=entry_node(order))}"


def order_detail(order: dict[str, Any]) -> Table:
    """One order as a two-column grid of what a person wants to know."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    rows: list[tuple[str, str | None]] = [
        ("Order", order.get("id")),
        ("Name", order.get("name")),
        ("Status", order.get("status")),
        ("Wants", machine_wanted(order) + " incl. fees"),
        ("Regions", ", ".join(order.get("regions") or []) or "any"),
        ("Min disk", f"{order['min_disk_gb']} GB" if order.get("min_disk_gb") else None),
        ("Interconnect", order.get("interconnect")),
        ("Cluster", cluster(order)),
        ("Start-up script", startup_script(order)),
        ("Image", order.get("image")),
        ("No credentials for", ", ".join(order.get("disabled_providers") or []) or None),
        ("Expires", when(order["expires_at"]) if order.get("expires_at") else None),
        ("Placed", when(order.get("created_at"))),
        ("Max runtime", _hours(order.get("max_runtime_hours"))),
        ("Max total", usd(order["max_total_usd"]) if order.get("max_total_usd") else None),
        ("Machine", machine_got(order.get("deployment"), entry=entry_node(order))),
        (f"{entry_node(order).capitalize()} IP", order.get("login_ip")),
        ("SSH", order.get("ssh_command")),
        ("Engine tunnel", order.get("serve_tunnel")),
        ("Machines", machines(order)),
        ("Running since", when(order["running_since"]) if order.get("running_since") else None),
        ("Paid until", when(order["paid_until"]) if _billing(order) else None),
        ("Charged", usd(order.get("charged_usd")) if order.get("deployment") else None),
        ("Terminates", when(order["terminates_at"]) if order.get("terminates_at") else None),
        ("Ended", when(order["ended_at"]) if order.get("ended_at") else None),
        ("Why it ended", order.get("terminate_reason")),
        ("Expected wait", _estimate(order.get("estimate"))),
    ]
    for label, value in rows:
        if value:
            grid.add_row(label, str(value))
    return grid


def startup_script(order: dict[str, Any]) -> str | None:
    """`1,234 bytes, SHA-256 9f86d0...`: the script an order carries, as the API shows it."""
    size, digest = order.get("startup_script_bytes"), order.get("startup_script_sha256")
    if size is None or digest is None:
        return None
    return f"{size:,} bytes, SHA-256 {digest}"


def _hours(value: Any) -> str | None:
    return None if value is None else f"{value:g} h"


def _billing(order: dict[str, Any]) -> bool:
    """Whether the order's machine is still paid by the hour (not ended)."""
    return bool(order.get("paid_until")) and order.get("status") in ("deployed", "running")


def events_table(events: list[dict[str, Any]]) -> Table:
    """An order's timeline: when, what kind, the sentence."""
    table = Table(box=None, pad_edge=False)
    table.add_column("WHEN", no_wrap=True)
    table.add_column("KIND", no_wrap=True)
    table.add_column("WHAT HAPPENED")
    for event in events:
        table.add_row(when(event.get("created_at")), event.get("kind"), event.get("message"))
    return table


def offers_table(offers: list[dict[str, Any]]) -> Table:
    """The offers in stock now, cheapest first, with the price a user pays."""
    table = Table(box=None, pad_edge=False)
    for name in ("PROVIDER", "REGION", "SKU", "GPUS", "LINK", "AVAILABLE"):
        table.add_column(name, no_wrap=True)
    table.add_column("$/H INCL. FEES", justify="right", no_wrap=True)
    table.add_column("YOUR MATCHING ORDERS")
    for offer in offers:
        available = offer.get("available")
        table.add_row(
            offer.get("provider"),
            offer.get("region"),
            offer.get("sku"),
            shape(offer),
            _links(offer),
            "in stock" if available is None else str(available),
            usd(offer.get("price_per_hour_with_fees")),
            ", ".join(offer.get("matching_orders") or []),
        )
    return table


def _links(offer: dict[str, Any]) -> str:
    """`sxm`, or `sxm+infiniband` for a cluster: within a node, then between them."""
    within = offer.get("interconnect") or "-"
    between = offer.get("cluster_interconnect")
    return f"{within}+{between}" if between else within


def provider_reads(providers: list[dict[str, Any]]) -> list[str]:
    """How fresh each provider's stock read is: one line each."""
    lines = []
    for read in providers:
        line = f"{read.get('provider')}: read {when(read.get('fetched_at'))}"
        if read.get("error"):
            line += f" (last try failed: {read['error']})"
        lines.append(line)
    return lines


def account_grid(account: dict[str, Any]) -> Table:
    """Balance, held and available."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(justify="right")
    grid.add_row("Account", f"{account.get('id')} ({account.get('name')})")
    grid.add_row("Balance", usd(account.get("balance")))
    grid.add_row("Held", usd(account.get("held")))
    grid.add_row("Available", usd(account.get("available")))
    grid.add_row("Machines cost", f"{usd(account.get('hourly_spend'))}/h")
    runway = account.get("runway_seconds")
    if runway is not None:
        low = " (low: top up)" if account.get("low_balance") else ""
        grid.add_row("Pays them for", f"{duration(runway)}{low}")
    return grid


def ledger_table(entries: list[dict[str, Any]]) -> Table:
    """Movements of money, newest first: when, what, the amount and what it left."""
    table = Table(box=None, pad_edge=False)
    table.add_column("WHEN", no_wrap=True)
    table.add_column("KIND", no_wrap=True)
    table.add_column("AMOUNT", justify="right", no_wrap=True)
    table.add_column("BALANCE", justify="right", no_wrap=True)
    table.add_column("HELD", justify="right", no_wrap=True)
    table.add_column("ORDER", no_wrap=True)
    table.add_column("NOTE")
    for entry in entries:
        table.add_row(
            when(entry.get("created_at")),
            entry.get("kind"),
            usd(entry.get("amount")),
            usd(entry.get("balance_after")),
            usd(entry.get("held_after")),
            entry.get("order_id") or "-",
            entry.get("note") or "",
        )
    return table


def stream_line(event: dict[str, Any]) -> str:
    """One event of the stream in one line: time, order (or `-`), type, message."""
    message = " ".join(str(event.get("message") or "").split())
    order_id = event.get("order_id") or "-"
    order = event.get("data")
    if str(event.get("type") or "").startswith("order.") and isinstance(order, dict):
        message += f" [cluster: {shape(order)}]" if nodes(order) > 1 else ""
    return f"{when(event.get('timestamp'))}  {order_id}  {event.get('type')}  {message}"
