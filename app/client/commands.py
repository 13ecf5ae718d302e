"""The client commands: `orders` (place, list, get, cancel, terminate, limits, events),
`offers`, `account`, `watch` and `models` (`models fit`). `add_client_commands` puts them on the
`autoprovision` command (app/cli/) beside the server's."""

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from app.client import options, render
from app.client.api import (
    DEFAULT_URL,
    KEY_ENV,
    URL_ENV,
    Api,
    ClientError,
    Exit,
    Target,
    api_path,
)
from app.client.model_commands import models
from app.client.watch import Until, Watch

PROG = "autoprovision"
TERMINABLE = ("deploying", "deployed", "running")  # an order whose machine a terminate ends

orders = typer.Typer(
    help="Place, list, read, cancel and terminate orders, and set their limits.",
    no_args_is_help=True,
)

Url = Annotated[
    str | None,
    typer.Option(
        "--url",
        help=f"The service's address (default: ${URL_ENV}, else {DEFAULT_URL}).",
        show_default=False,
    ),
]
Key = Annotated[
    str | None,
    typer.Option(
        "--key", help=f"Your account's API key (default: ${KEY_ENV}).", show_default=False
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print the API's JSON, for scripts.")]
OrderId = Annotated[
    str, typer.Argument(metavar="ORDER_ID", help="The order's id (ord_...).", show_default=False)
]


def _api(url: str | None, key: str | None) -> Api:
    return Api(Target.resolve(url, key))


@orders.command("place")
def place(
    provider: Annotated[
        list[str],
        typer.Option(
            "--provider", "-p", help="A provider you accept; repeat, or separate with commas."
        ),
    ],
    max_price: Annotated[
        str,
        typer.Option(
            "--max-price",
            help="max_price_per_hour: the most you pay per hour for the whole machine (the "
            "whole cluster with --nodes), fees included (USD, e.g. 46.50).",
        ),
    ],
    gpu_model: Annotated[
        str | None,
        typer.Option("--gpu-model", "-g", help="GPU model, e.g. B300 or h100 (not with --model)."),
    ] = None,
    gpu_count: Annotated[
        int | None, typer.Option("--gpu-count", "-n", help="GPUs in the machine.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Order by model instead of -g/-n: a Hugging Face id (see `models`); the order "
            "takes every machine that holds it.",
        ),
    ] = None,
    min_cache_gb: Annotated[
        int | None,
        typer.Option("--min-cache-gb", help="With --model: room the KV cache needs (GB, 100)."),
    ] = None,
    serve: Annotated[
        str | None,
        typer.Option(
            "--serve",
            help="With --model: serve it at boot with this engine (vllm or sglang); its port is "
            "on the machine's loopback, and `orders get` shows the SSH tunnel once it runs.",
        ),
    ] = None,
    region: Annotated[
        list[str] | None,
        typer.Option("--region", "-r", help="A region you accept; repeat. Default: any."),
    ] = None,
    min_disk_gb: Annotated[
        int | None, typer.Option("--min-disk-gb", help="Smallest acceptable disk, in GB.")
    ] = None,
    interconnect: Annotated[
        str | None, typer.Option("--interconnect", help="pcie, nvlink or sxm.")
    ] = None,
    nodes: options.Nodes = 1,
    cluster_interconnect: options.ClusterInterconnect = None,
    on_node_lost: options.OnNodeLost = None,
    expires_at: Annotated[
        str | None,
        typer.Option(
            "--expires-at",
            help="Stop waiting then: ISO 8601 with a timezone, e.g. 2027-01-31T18:00Z.",
        ),
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="Your label for the order.")] = None,
    ssh_public_key: Annotated[
        str | None,
        typer.Option("--ssh-public-key", help="One OpenSSH public key line the machine accepts."),
    ] = None,
    ssh_public_key_file: Annotated[
        Path | None,
        typer.Option(
            "--ssh-public-key-file", help="A file holding it (e.g. ~/.ssh/id_ed25519.pub)."
        ),
    ] = None,
    max_runtime_hours: options.MaxRuntime = None,
    max_total: options.MaxTotal = None,
    alternatives: options.Alternatives = None,
    prefer: options.Prefer = None,
    startup_script: options.StartupScript = None,
    image: options.Image = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            "--idempotency-key",
            help="Retry-safe key: the same key and order within 24 h places it once. "
            "Default: a new random one.",
            show_default=False,
        ),
    ] = None,
    url: Url = None,
    key: Key = None,
    as_json: Json = False,
) -> None:
    """Place an order: it waits, at no cost, until matching stock appears, then deploys."""
    body: dict[str, Any] = options.machine_or_model(gpu_model, gpu_count, model, min_cache_gb)
    if serve is not None:
        if model is None:
            raise typer.BadParameter("is for orders by --model", param_hint="--serve")
        body["serve"] = {"engine": serve}
    body["providers"] = options.listed(provider)
    body["max_price_per_hour"] = options.usd(max_price, "--max-price")
    optional = {
        "regions": options.listed(region) or None,
        "min_disk_gb": min_disk_gb,
        "interconnect": interconnect,
        "expires_at": expires_at,
        "name": name,
        "ssh_public_key": options.ssh_key(ssh_public_key, ssh_public_key_file),
        "max_runtime_hours": options.limit(max_runtime_hours, "--max-runtime-hours", money=False),
        "max_total_usd": options.limit(max_total, "--max-total", money=True),
        "startup_script": options.script_text(startup_script),
        "image": image,
    }
    body.update({field: value for field, value in optional.items() if value is not None})
    body.update(options.cluster(nodes, cluster_interconnect, on_node_lost))
    if alternatives:  # the options above are the first shape; each --alt another
        machine = {k: body.pop(k) for k in options.MACHINE_FIELDS if k in body}
        others = [options.alternative(a, machine["providers"]) for a in alternatives]
        body["alternatives"] = [machine, *others]
        if prefer is not None:
            body["prefer"] = prefer
    elif prefer is not None:
        raise typer.BadParameter("is for orders with --alt", param_hint="--prefer")
    once = options.idempotency_key(idempotency_key)
    with _api(url, key) as api:
        answer = api.post(api_path("orders"), body, idempotency_key=once)
    if as_json:
        render.emit_json(answer.text)
        return
    order = answer.body
    how = "Already placed with this idempotency key" if answer.replayed else "Placed"
    out = render.console()
    out.print(f"{how}: {order['id']}, {render.machine_wanted(order)} ({order['status']}).")
    out.print(f"Follow it: {PROG} watch {order['id']} --until running")


@orders.command("list")
def list_orders(
    status: Annotated[
        str | None,
        typer.Option("--status", "-s", help="Only orders in this status, e.g. waiting, running."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="Orders per page (1-100).")] = 20,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="Start after this page's next_cursor.")
    ] = None,
    all_pages: Annotated[
        bool, typer.Option("--all", help="Every page, not only the first.")
    ] = False,
    url: Url = None,
    key: Key = None,
    as_json: Json = False,
) -> None:
    """Your orders, newest first."""
    params: dict[str, Any] = {"status": status, "limit": limit, "cursor": cursor}
    with _api(url, key) as api:
        answer = api.get(api_path("orders"), params)
        page, found = answer.body, list(answer.body["data"])
        while all_pages and page.get("next_cursor"):
            page = api.get(api_path("orders"), {**params, "cursor": page["next_cursor"]}).body
            found.extend(page["data"])
    if as_json:
        render.emit_json({"data": found, "next_cursor": None} if all_pages else answer.text)
        return
    out = render.console()
    if not found:
        out.print(f"No {status + ' ' if status else ''}orders.")
        return
    out.print(render.orders_table(found))
    if page.get("next_cursor"):
        more = f" --status {status}" if status else ""
        out.print(f"More: {PROG} orders list{more} --cursor {page['next_cursor']}  (or --all)")


@orders.command("get")
def get_order(order_id: OrderId, url: Url = None, key: Key = None, as_json: Json = False) -> None:
    """One order: what it wants, its machine once it has one, its expected wait."""
    with _api(url, key) as api:
        answer = api.get(api_path("orders", order_id))
    if as_json:
        render.emit_json(answer.text)
        return
    render.console().print(render.order_detail(answer.body))


@orders.command("cancel")
def cancel(order_id: OrderId, url: Url = None, key: Key = None, as_json: Json = False) -> None:
    """Cancel a waiting order (refused, exit 1, once it is deploying or later)."""
    with _api(url, key) as api:
        try:
            answer = api.post(api_path("orders", order_id, "cancel"))
        except ClientError as exc:
            status = api.get(api_path("orders", order_id)).body.get("status")
            if exc.code != "order_not_waiting" or status not in TERMINABLE:
                raise
            raise ClientError(
                f"{order_id} is {status}: only a waiting order can be cancelled; "
                f"`{PROG} orders terminate {order_id}` ends its machine",
                exc.exit_code,
            ) from None
    if as_json:
        render.emit_json(answer.text)
        return
    render.console().print(f"Cancelled {answer.body['id']} ({answer.body['status']}).")


@orders.command("terminate")
def terminate(
    order_id: OrderId,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask first.")] = False,
    url: Url = None,
    key: Key = None,
    as_json: Json = False,
) -> None:
    """Delete the order's machine for good; what was paid and not used comes back."""
    with _api(url, key) as api:
        if not yes:
            order = api.get(api_path("orders", order_id)).body
            if order.get("status") == "waiting":
                raise _nothing_to_terminate(order_id)
            machine = render.machine_got(order.get("deployment"), entry=render.entry_node(order))
            typer.confirm(
                f"Terminate {order_id} ({order.get('status')}, {machine})? Its machine is "
                "deleted, with its disk, and cannot be brought back.",
                abort=True,
            )
        try:
            answer = api.post(api_path("orders", order_id, "terminate"))
        except ClientError as exc:
            if exc.code == "not_deployed":
                raise _nothing_to_terminate(order_id) from None
            raise
    if as_json:
        render.emit_json(answer.text)
        return
    out = render.console()
    out.print(f"Terminating {answer.body['id']} ({answer.body['status']}).")
    if answer.body["status"] != "terminated":
        out.print(f"Follow it: {PROG} watch {answer.body['id']} --until terminated")


def _nothing_to_terminate(order_id: str) -> ClientError:
    return ClientError(
        f"{order_id} is waiting: no machine runs yet; cancel it with "
        f"`{PROG} orders cancel {order_id}`",
        Exit.REFUSED,
    )


@orders.command("limits")
def limits(
    order_id: OrderId,
    max_runtime_hours: options.MaxRuntime = None,
    max_total: options.MaxTotal = None,
    url: Url = None,
    key: Key = None,
    as_json: Json = False,
) -> None:
    """Change an order's limits while its machine has not ended (`none` removes one)."""
    body: dict[str, Any] = {}
    if max_runtime_hours is not None:
        body["max_runtime_hours"] = options.limit(
            max_runtime_hours, "--max-runtime-hours", money=False
        )
    if max_total is not None:
        body["max_total_usd"] = options.limit(max_total, "--max-total", money=True)
    if not body:
        raise typer.BadParameter(
            "give --max-runtime-hours or --max-total (a value, or none to remove it)",
            param_hint="--max-runtime-hours / --max-total",
        )
    with _api(url, key) as api:
        answer = api.patch(api_path("orders", order_id), body)
    if as_json:
        render.emit_json(answer.text)
        return
    render.console().print(render.order_detail(answer.body))


@orders.command("events")
def events(order_id: OrderId, url: Url = None, key: Key = None, as_json: Json = False) -> None:
    """What happened to an order, oldest first, in sentences."""
    with _api(url, key) as api:
        answer = api.get(api_path("orders", order_id, "events"))
    if as_json:
        render.emit_json(answer.text)
        return
    render.console().print(render.events_table(answer.body))


def offers(
    gpu_model: Annotated[
        str | None, typer.Option("--gpu-model", "-g", help="Only this GPU model.")
    ] = None,
    gpu_count: Annotated[
        int | None, typer.Option("--gpu-count", "-n", help="Only machines with this many GPUs.")
    ] = None,
    nodes: Annotated[
        int | None,
        typer.Option("--nodes", help="Only offers of this many machines (1: one machine)."),
    ] = None,
    provider: Annotated[
        str | None, typer.Option("--provider", "-p", help="Only this provider.")
    ] = None,
    url: Url = None,
    key: Key = None,
    as_json: Json = False,
) -> None:
    """What the providers have in stock now, cheapest first, priced with fees."""
    params = {"gpu_model": gpu_model, "gpu_count": gpu_count, "nodes": nodes, "provider": provider}
    with _api(url, key) as api:
        answer = api.get(api_path("offers"), params)
    if as_json:
        render.emit_json(answer.text)
        return
    out = render.console()
    if answer.body["data"]:
        out.print(render.offers_table(answer.body["data"]))
    else:
        out.print("Nothing in stock that matches, as of the latest reads.")
    for line in render.provider_reads(answer.body.get("providers") or []):
        out.print(line)


account_commands = typer.Typer(
    help="Your balance and ledger; in demo mode, top-ups of play money.",
    invoke_without_command=True,
)


@account_commands.callback()
def account(
    ctx: typer.Context,
    ledger: Annotated[
        bool,
        typer.Option(
            "--ledger", help="Also the newest movements of money, with the balance after."
        ),
    ] = False,
    limit: Annotated[
        int, typer.Option("--limit", help="Ledger entries with --ledger (1-100).")
    ] = 20,
    url: Url = None,
    key: Key = None,
    as_json: Json = False,
) -> None:
    """Your balance, what is held for creates in flight, what is available, and how long it
    pays your machines."""
    if ctx.invoked_subcommand is not None:
        return
    with _api(url, key) as api:
        answer = api.get(api_path("account"))
        entries = api.get(api_path("account", "ledger"), {"limit": limit}) if ledger else None
    if as_json:
        render.emit_json(
            {**answer.body, "ledger": entries.body["data"]} if entries else answer.text
        )
        return
    out = render.console()
    out.print(render.account_grid(answer.body))
    if entries is not None:
        movements = entries.body["data"]
        out.print(render.ledger_table(movements) if movements else "No movements yet.")


@account_commands.command("top-up")
def top_up(
    amount: Annotated[
        str, typer.Argument(metavar="AMOUNT", help="USD to add, e.g. 500 (at most 1000).")
    ],
    url: Url = None,
    key: Key = None,
    as_json: Json = False,
) -> None:
    """Demo mode only: add play money to your balance (live top-ups are the operator's)."""
    body = {"amount": options.usd(amount, "AMOUNT")}
    once = options.idempotency_key(None)  # a retry after a lost answer adds it once
    with _api(url, key) as api:
        answer = api.post(api_path("account", "credits"), body, idempotency_key=once)
    if as_json:
        render.emit_json(answer.text)
        return
    render.console().print(
        f"Added {render.usd(answer.body['amount'])}: the balance is now "
        f"{render.usd(answer.body['balance_after'])}."
    )


def watch(
    order_id: Annotated[
        str | None,
        typer.Argument(
            metavar="ORDER_ID",
            help="Only this order's events (default: the whole account's).",
            show_default=False,
        ),
    ] = None,
    until: Annotated[
        Until | None,
        typer.Option(
            "--until",
            help="Exit 0 once the order gets this far (running: print its IP; ready: its "
            "machine reported its model answers, with the tunnel; terminated: what it cost); "
            "exit 1 if it can no longer get there (failed, cancelled, expired, lost, or its "
            "machine reported it failed).",
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            help="Stop after this many seconds: exit 1 with --until (the order did not get "
            "there in time), else 0.",
        ),
    ] = None,
    url: Url = None,
    key: Key = None,
    as_json: Json = False,
) -> None:
    """Print events as they happen, one line each (one JSON object per line with --json)."""
    if until is not None and order_id is None:
        raise typer.BadParameter("needs an ORDER_ID: the order to wait for", param_hint="--until")
    if timeout is not None and not timeout > 0:
        raise typer.BadParameter("must be more than 0 seconds", param_hint="--timeout")
    target = Target.resolve(url, key)
    job = Watch(target, order_id=order_id, until=until, as_json=as_json)
    code = asyncio.run(job.run(timeout))
    if code is not Exit.OK:
        raise typer.Exit(int(code))


def add_client_commands(root: typer.Typer, panel: str) -> None:
    """Put the client commands on `root`, listed under `panel` in its help."""
    root.add_typer(orders, name="orders", rich_help_panel=panel)
    root.command("offers", rich_help_panel=panel)(offers)
    root.add_typer(account_commands, name="account", rich_help_panel=panel)
    root.command("watch", rich_help_panel=panel)(watch)
    root.add_typer(models, name="models", rich_help_panel=panel)
