"""`autoprovision models`: the open models the service knows, and `models fit ID`: which
machine shapes hold one."""

from typing import Annotated, Any

import typer
from rich.table import Table

from app.client import render
from app.client.api import KEY_ENV, URL_ENV, Api, Target, api_path

models = typer.Typer(
    help="The open models the service knows, and which machines hold one.",
    invoke_without_command=True,
)

Url = Annotated[
    str | None,
    typer.Option("--url", help=f"The service's address (default: ${URL_ENV}).", show_default=False),
]
Key = Annotated[
    str | None,
    typer.Option(
        "--key", help=f"Your account's API key (default: ${KEY_ENV}).", show_default=False
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print the API's JSON, for scripts.")]


@models.callback()
def listed(ctx: typer.Context, url: Url = None, key: Key = None, as_json: Json = False) -> None:
    """The models: Hugging Face id, checkpoint size, format and context."""
    if ctx.invoked_subcommand is not None:
        return
    with Api(Target.resolve(url, key)) as api:
        answer = api.get(api_path("models"))
    if as_json:
        render.emit_json(answer.text)
        return
    render.console().print(_models_table(answer.body["data"]))


@models.command("fit")
def fit(
    model_id: Annotated[
        str,
        typer.Argument(metavar="MODEL_ID", help='Its Hugging Face id or its name ("Kimi K3").'),
    ],
    min_cache_gb: Annotated[
        int, typer.Option("--min-cache-gb", help="Room the KV cache needs, in GB.")
    ] = 0,
    every: Annotated[
        bool, typer.Option("--all", help="Also the shapes that do not hold it.")
    ] = False,
    url: Url = None,
    key: Key = None,
    as_json: Json = False,
) -> None:
    """The machine shapes that hold a model (92 % of the GPU memory less the checkpoint leaves
    room for the cache), the room left and the disk it needs."""
    params: dict[str, Any] = {"min_cache_gb": min_cache_gb}
    if not every:
        params["holds"] = "true"
    with Api(Target.resolve(url, key)) as api:
        answer = api.get(api_path("models", model_id, "fit"), params)
    if as_json:
        render.emit_json(answer.text)
        return
    out = render.console()
    model = answer.body["model"]
    out.print(
        f"{model['name']} ({model['id']}): {model['checkpoint_gb']} GB; {answer.body['rule']}"
    )
    if answer.body["shapes"]:
        out.print(_fit_table(answer.body["shapes"]))
    else:
        out.print("No machine shape holds it with that much room for the cache.")


def _models_table(listed: list[dict[str, Any]]) -> Table:
    table = Table(box=None, pad_edge=False)
    for name in ("ID", "NAME", "CHECKPOINT GB", "FORMAT", "CONTEXT"):
        table.add_column(name, no_wrap=True)
    for model in listed:
        context = model.get("context_tokens")
        table.add_row(
            model["id"],
            model["name"],
            str(model["checkpoint_gb"]),
            model.get("format") or "-",
            "-" if context is None else f"{context:,}",
        )
    return table


def _fit_table(shapes: list[dict[str, Any]]) -> Table:
    table = Table(box=None, pad_edge=False)
    for name in ("MACHINE", "GPU MEMORY GB", "CACHE ROOM GB", "HOLDS", "DISK GB", "CLUSTERS AT"):
        table.add_column(name, no_wrap=True)
    for shape in shapes:
        table.add_row(
            render.shape(shape),
            str(shape["gpu_memory_gb"]),
            str(shape["cache_room_gb"]),
            "yes" if shape["holds"] else "no",
            str(shape["disk_gb"]),
            ", ".join(shape.get("cluster_providers") or []) or "-",
        )
    return table
