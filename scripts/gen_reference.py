"""The reference pages under docs/reference/ and `.env.example`, generated from the code so that
they cannot drift.

    python scripts/gen_reference.py           # write them (what `make reference` runs)
    python scripts/gen_reference.py --check   # exit 1, naming them, if any is out of date

MkDocs loads this file as a hook too (`hooks:` in mkdocs.yml): before a build it compares every
committed page with what the code says now, and stops the build if one differs, so `make docs`
fails on a stale page. `tests/docs/test_reference.py` does the same in the test suite.

Each page is made from what the service itself uses: `Settings` and each provider's settings
model (configuration), the Typer command tree (CLI), the FastAPI app's OpenAPI
document (REST API), the transition tables (states), the exceptions and the error handlers'
calls (error codes), the event-type enums and the payload models (events), the GPU catalogue.
Where the code holds no sentence for something (an error code, an event type), the sentence is
in this file, and the page is refused if a code or type has none, or one no longer exists.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import re
import sys
import textwrap
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script or as a MkDocs hook, from anywhere
    sys.path.insert(0, str(ROOT))

REFERENCE = ROOT / "docs" / "reference"
APP = ROOT / "app"
GENERATED = (
    "<!-- Generated from the code by scripts/gen_reference.py: do not edit by hand, run "
    "`make reference`. -->"
)


class ReferenceError(RuntimeError):
    """The code says something the generator cannot document (a code without a sentence)."""


# --- helpers ------------------------------------------------------------------------------


def _cell(text: object) -> str:
    """Text for a Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(head: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    head = list(head)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _code(value: object) -> str:
    return f"`{value}`"


def _page(title: str, *parts: str) -> str:
    body = "\n\n".join(part.strip("\n") for part in parts if part)
    return f"{GENERATED}\n\n# {title}\n\n{body}\n"


def _first_sentence(text: str | None) -> str:
    text = " ".join((text or "").split())
    match = re.match(r"(.+?\.)(\s|$)", text)
    return match.group(1) if match else text


def _source_notes(cls: type) -> dict[str, str]:
    """What the source says of each name in a class body: its trailing comment, else the comment
    block right above it (which then applies to the names after it up to a blank line)."""
    notes: dict[str, str] = {}
    block: list[str] = []
    group = ""
    for line in inspect.getsource(cls).splitlines()[1:]:
        stripped = line.strip()
        if not stripped:
            block, group = [], ""
            continue
        if stripped.startswith("#"):
            block.append(stripped.lstrip("#").strip())
            continue
        if block:
            group, block = " ".join(block), []
        match = re.match(r"([A-Za-z_][A-Za-z0-9_]*)\s*[:=]", stripped)
        if match is None:
            group = ""
            continue
        trailing = re.search(r"\s#\s*(.+)$", stripped)
        notes[match.group(1)] = trailing.group(1).strip() if trailing else group
    return notes


def _sentence(text: str) -> str:
    """A help line as a sentence: a capital first, a full stop last."""
    text = " ".join(text.split())
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _members(enum: type[StrEnum]) -> list[tuple[str, str]]:
    """Each member's value and what the source says of it."""
    notes = _source_notes(enum)
    return [(member.value, notes.get(member.name, "")) for member in enum]


def _default(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return _code(str(value).lower())
    if isinstance(value, float) and value.is_integer():
        return _code(int(value))
    if isinstance(value, list):
        return _code(json.dumps([int(v) if float(v).is_integer() else v for v in value]))
    if isinstance(value, Decimal | Path):
        return _code(value)
    return _code(value)


# --- configuration ------------------------------------------------------------------------


def configuration() -> str:
    """Every setting of `Settings`, group by group, then each provider's, with its variable,
    default and meaning."""
    from app.providers.registry import offered
    from app.settings import GROUPS, Settings

    grouped = {name for group in GROUPS for name in group.model_fields}
    for name in Settings.model_fields:
        if name not in grouped and name != "providers":  # the providers' own: below
            raise ReferenceError(
                f"Settings.{name} is in no group: add it to one of app.settings.GROUPS"
            )
    groups: list[str] = []
    for group in GROUPS:
        rows: list[tuple[str, str, str]] = []
        for name, field in group.model_fields.items():
            if not field.description:
                raise ReferenceError(
                    f"{group.__name__}.{name} has no description: give it Field(description=...)"
                )
            rows.append(
                (_code(f"AUTOPROVISION_{name.upper()}"), _default(field.default), field.description)
            )
        intro = " ".join((group.__doc__ or "").split())
        groups += [f"### {group.title}", intro, _table(["Variable", "Default", "Meaning"], rows)]
    parts = [
        "Settings come from environment variables prefixed `AUTOPROVISION_`, or from a `.env` "
        "file in the directory you start the service from (environment variables win over "
        "`.env`). `.env.example` lists all of them with their defaults; copy it to `.env` and "
        "edit. An empty value means the default.",
        "An invalid setting (say, a 10-character admin key) stops the command at start-up with "
        "an error that names the setting.",
        "## The service",
        "The price an order's maximum is compared with is "
        "`provider price x (1 + FEE_PERCENT / 100) + FEE_FLAT_PER_HOUR`, rounded to cents. The "
        "last group, the watcher's inner timing, suits any deployment as it is; tests and "
        "benchmarks change it.",
        *groups,
        "## The providers",
        "Each provider's settings come from its own package (`app/providers/<name>/spec.py`). "
        "A provider is used in live mode when all of its credentials are set. Secrets are never "
        "logged or returned by the API.",
    ]
    for spec in offered():
        model = spec.settings_model
        fields = model.model_fields
        rows = []
        for name, field in fields.items():
            if not field.description:
                raise ReferenceError(
                    f"{model.__name__}.{name} has no description: give it Field(description=...)"
                )
            rows.append((_code(model.env_name(name)), _default(field.default), field.description))
        credentials = ", ".join(_code(model.env_name(n)) for n in model.credential_fields)
        parts += [
            f"### {spec.display_name}",
            f"Credentials: {credentials}.",
            _table(["Variable", "Default", "Meaning"], rows),
        ]
    return _page("Configuration", *parts)


def _env_default(value: object) -> str:
    """A default as `.env` spells it (`_default` without the Markdown)."""
    return "" if value is None else _default(value).strip("`")


def _env_lines(variable: str, default: object, description: str) -> list[str]:
    wrapped = textwrap.wrap(" ".join(description.split()), width=96)
    return [*(f"# {line}" for line in wrapped), f"# {variable}={_env_default(default)}"]


def env_example() -> str:
    """`.env.example`: every setting, group by group, commented out at its default, with its
    meaning; then each provider's."""
    from app.providers.registry import offered
    from app.settings import GROUPS

    lines = [
        "# autoprovision settings, generated from the code by scripts/gen_reference.py (do not",
        "# edit by hand). Copy this file to `.env` in the directory you start the service from,",
        "# then uncomment and change what you need. Real environment variables override `.env`.",
        "# Every line below shows the default; an empty value also means the default.",
        "",
    ]
    for group in GROUPS:
        lines += [f"# === {group.title} ==="]
        for name, field in group.model_fields.items():
            variable = f"AUTOPROVISION_{name.upper()}"
            lines += _env_lines(variable, field.default, field.description or "")
        lines.append("")
    for spec in offered():
        model = spec.settings_model
        lines += [f"# === {spec.display_name} ==="]
        for name, field in model.model_fields.items():
            lines += _env_lines(model.env_name(name), field.default, field.description or "")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


# --- command line -------------------------------------------------------------------------


def _click_rows(command: Any) -> list[tuple[str, str, str]]:
    # Duck-typed: Typer may carry its own copy of click.
    rows = []
    for param in command.params:
        if param.name == "help":
            continue
        if param.param_type_name == "argument":
            names = _code(param.metavar or param.name.upper())
        else:
            names = ", ".join(_code(o) for o in [*param.opts, *param.secondary_opts])
        required = " Required." if param.required else ""
        default = param.default
        hidden = default is None or default is False or default == () or callable(default)
        shown = "" if hidden or getattr(param, "show_default", None) is False else _code(default)
        rows.append((names, (getattr(param, "help", None) or "") + required, shown))
    return rows


def _subcommands(command: Any) -> list[Any]:
    children = list(getattr(command, "commands", {}).values())
    return sorted(children, key=lambda c: not hasattr(c, "commands"))  # groups first


def _click_commands(command: Any, path: tuple[str, ...]) -> Iterable[tuple[tuple[str, ...], Any]]:
    yield path, command
    for child in _subcommands(command):
        yield from _click_commands(child, (*path, child.name))


def _commands() -> list[tuple[tuple[str, ...], Any]]:
    """Every command of the `autoprovision` app and its path below it, the root first."""
    import typer.main

    from app.cli import cli

    return list(_click_commands(typer.main.get_command(cli), ()))


def _serves(command: Any) -> bool:
    """Whether a command runs the service (listed in the server commands' panel)."""
    from app.cli import SERVICE_PANEL

    return getattr(command, "rich_help_panel", None) == SERVICE_PANEL


def command_names() -> list[str]:
    """Every command a user can type after `autoprovision`, as `orders place`."""
    return [" ".join(path) for path, _command in _commands()[1:]]


def _command_section(path: tuple[str, ...], command: Any) -> list[str]:
    usage = " ".join(command.collect_usage_pieces(command.context_class(command)))
    parts = [
        f"### autoprovision {' '.join(path)}",
        f"```text\nautoprovision {' '.join(path)} {usage}\n```",
        " ".join((command.help or "").split()),
    ]
    rows = _click_rows(command)
    if not hasattr(command, "commands") or rows:  # a group run alone may take options
        parts.append(_table(["Option", "Meaning", "Default"], rows) if rows else "No options.")
    return parts


def cli() -> str:
    """The command line, from the one Typer app: the server commands, then the client's."""
    from app.cli import CLIENT_EPILOG

    commands = _commands()[1:]
    server = [(p, c) for p, c in commands if _serves(c)]
    client = [(p, c) for p, c in commands if not _serves(c)]

    def listing(entries: list[tuple[tuple[str, ...], Any]]) -> str:
        return _table(
            ["Command", "What it does"],
            [(_code("autoprovision " + " ".join(p)), _first_sentence(c.help)) for p, c in entries],
        )

    parts = [
        "One command, `autoprovision` (in `.venv/bin/` after `make run`; `python -m app` does "
        "the same), runs the service and talks to a running one. `autoprovision COMMAND "
        "--help` prints what this page says about each.",
        "## Running the service",
        listing(server),
    ]
    for path, command in server:
        parts += _command_section(path, command)
    parts += ["## Talking to a running service", CLIENT_EPILOG, listing(client)]
    for path, command in client:
        parts += _command_section(path, command)
    return _page("Command line", *parts)


# --- REST API -----------------------------------------------------------------------------


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document the service serves at /openapi.json, with default settings."""
    from app.main import create_app
    from app.providers.registry import SPECS
    from app.settings import Settings

    # Defaults only: neither the environment nor a .env file may change the page.
    settings = Settings.model_validate({})
    providers = {spec.name: spec.settings_model.model_validate({}) for spec in SPECS}
    document: dict[str, Any] = create_app(
        settings.model_copy(update={"providers": providers})
    ).openapi()
    return document


def openapi_json() -> str:
    return json.dumps(openapi_document(), indent=2, ensure_ascii=False) + "\n"


def api() -> str:
    document = openapi_document()
    by_tag: dict[str, list[tuple[str, str, str]]] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            tag = (operation.get("tags") or ["other"])[0]
            what = _first_sentence(operation.get("description")) or operation.get("summary", "")
            by_tag.setdefault(tag, []).append((_code(method.upper()), _code(path), what))
    parts = [
        "The service describes its API in an OpenAPI document: it serves it at `/openapi.json`, "
        "and shows it at `/docs`. This page is that document, as the code has it: the endpoints "
        "at a glance, then the whole document rendered below (request and response bodies, "
        "parameters, status codes). It is also here as a file: "
        "[openapi.json](openapi.json).",
        "The conventions every endpoint follows (authentication, JSON bodies, ids, errors) are "
        "in [the API guide](../guides/orders.md); error codes in [Error codes](errors.md).",
    ]
    for tag, rows in by_tag.items():
        parts += [f"## {tag.capitalize()}", _table(["Method", "Path", "What it does"], rows)]
    parts += [
        "## The OpenAPI document",
        "Rendered by Swagger UI, from the copy served with these pages (it needs JavaScript, "
        "and the pages served over HTTP: `make docs-serve`, or any static file server).",
        '<swagger-ui src="openapi.json"/>',
    ]
    return _page("REST API", *parts)


# --- states -------------------------------------------------------------------------------


def _transition_tables() -> list[tuple[type[StrEnum], Mapping[Any, Mapping[Any, str]]]]:
    from app.core import states

    tables = [v for k, v in vars(states).items() if k.endswith("_TRANSITIONS")]
    return [(type(next(iter(table))), table) for table in tables]


def states() -> str:
    from app.core import states

    parts = [
        "Every move of an order and of each of its create attempts is checked against a "
        "transition table in `app/core/states.py`: a move the table does not allow is a bug, "
        "raised and never written, and the database refuses a state it does not know. The "
        "diagrams and tables below are drawn from those tables.",
    ]
    for enum, table in _transition_tables():
        notes = dict(_members(enum))
        title = "Orders" if enum is states.OrderStatus else "Create attempts"
        intro = (
            "An order is what its owner placed. Each time it deploys, the service writes a "
            "create attempt for it (at most one open at a time), whose states follow."
            if enum is states.OrderStatus
            else "One attempt is one create call at one provider, and the VM it made, if any: "
            "the order's `deployment` in the API is its latest attempt."
        )
        final = [s for s, moves in table.items() if not moves]
        parts += [
            f"## {title}",
            intro,
            f"```mermaid\n{states.mermaid(table)}\n```",
            _table(
                ["From", "To", "When"],
                [
                    (_code(a), _code(b), why)
                    for a, moves in table.items()
                    for b, why in moves.items()
                ],
            ),
            _table(
                ["State", "What it means"],
                [(_code(s), notes[str(s)]) for s in table if notes.get(str(s))],
            ),
            "Final states: " + ", ".join(_code(s) for s in final) + ".",
        ]
    parts += [
        "## Why a machine was terminated",
        "An order's `terminate_reason`:",
        _table(["Reason", "When"], [(_code(v), n) for v, n in _members(states.TerminateReason)]),
        "## Ledger entries and holds",
        _table(["`kind`", ""], [(_code(v), n) for v, n in _members(states.LedgerKind)]),
        "A hold is "
        + ", ".join(_code(v) for v, _n in _members(states.HoldStatus))
        + ": "
        + (states.HoldStatus.__doc__ or ""),
    ]
    return _page("Order and attempt states", *parts)


# --- error codes --------------------------------------------------------------------------

# When each code is answered. A code the code base answers with and that has no line here, or
# a line for a code nothing answers with any more, stops the generator.
WHEN = {
    "bad_request": "the request could not be read at all",
    "bad_last_event_id": "a `Last-Event-ID` that is not a whole number (ASCII digits, at most "
    "19 of them past leading zeros), or newer than any event ever sent",
    "unauthorized": "no `Authorization: Bearer` header, or a key the service does not know",
    "forbidden": "a valid key that may not do this: an account key on `/v1/accounts`, the admin "
    "key on `/v1/account` or `/v1/orders`",
    "demo_only": "an account topping itself up (`POST /v1/account/credits`) outside demo mode: "
    "live top-ups are the operator's",
    "not_found": "no such account, order or path (or the order is another account's)",
    "method_not_allowed": "wrong HTTP method for the path",
    "not_acceptable": "the request's `Accept` header allows nothing the endpoint answers with",
    "request_timeout": "the request's body did not arrive within "
    "`AUTOPROVISION_REQUEST_TIMEOUT_SECONDS`; the connection is closed",
    "conflict": "other state conflicts",
    "order_not_waiting": "cancelling an order that is not `waiting`",
    "not_deployed": "terminating a `waiting` order: nothing runs yet, cancel it instead",
    "order_ended": "terminating, or changing the limits of, an order that has ended "
    "(`cancelled`, `expired`, `failed`, `terminated` or `lost`)",
    "attempt_ended": "a machine reported after its attempt ended: it is being deleted or gone, "
    "and its reports are no longer taken",
    "invalid_report_token": "a machine report whose bearer token belongs to no create attempt",
    "too_many_reports": "a machine reported the stage it last reported within a second "
    "(`Retry-After: 1`); a new stage is always taken",
    "stage_behind": "a machine reported a stage behind the one it reported already (a stage "
    "only moves forward, `failed` last)",
    "order_busy": "the order kept changing while a terminate was being committed; try again",
    "idempotency_key_in_use": "the first request with this `Idempotency-Key` is still running",
    "insufficient_funds": "available balance does not cover a hold (used by the watcher, not "
    "returned by the API)",
    "too_many_orders": "the account already has `AUTOPROVISION_MAX_WAITING_ORDERS_PER_ACCOUNT` "
    "orders waiting (`details.max_waiting_orders`)",
    "too_many_endpoints": "an account already has 20 webhook endpoints",
    "endpoint_disabled": "redelivering to a disabled endpoint (enable it first)",
    "payload_too_large": "request body over 64 KiB, whether declared in `Content-Length` or "
    "streamed",
    "unsupported_media_type": "a request body not sent as UTF-8 JSON (`Content-Type: "
    "application/json` or `+json`)",
    "validation_error": "a field is missing, unknown or out of range; see `details`",
    "providers_not_enabled": "every provider the order accepts lacks credentials on this "
    "service; `details.disabled_providers` names them",
    "invalid_json": "the body is not one UTF-8 JSON value, repeats a key, or is missing",
    "idempotency_key_reused": "the `Idempotency-Key` was used with different parameters",
    "invalid_idempotency_key": "the `Idempotency-Key` is empty, too long or not printable",
    "too_many_requests": "the caller already holds as many of something as it may",
    "too_many_placements": "the account placed `AUTOPROVISION_MAX_PLACEMENTS_PER_HOUR` orders "
    "in the last hour, cancelled ones too (`details.max_placements_per_hour`); `Retry-After` "
    "says in how many seconds the hour has room",
    "too_many_streams": "the account already holds `AUTOPROVISION_STREAM_MAX_PER_ACCOUNT` event "
    "streams on this replica",
    "internal_error": "a bug on our side; the details are in the server log",
    "database_unavailable": "only from `/readyz`: the database is not reachable",
    "overloaded": "the process is already serving `AUTOPROVISION_MAX_REQUESTS_IN_FLIGHT` "
    "requests, or this client (your account; without a key, your address) its share of them, "
    "`AUTOPROVISION_MAX_REQUESTS_IN_FLIGHT_PER_CLIENT`; or a stock summary or estimate over "
    "more than 7 days found its budget taken (`AUTOPROVISION_MAX_COSTLY_READS_IN_FLIGHT`, one "
    "per account); or no database connection came free in time. Nothing was done. Comes with "
    "`Retry-After: 1`: wait that long (better, a little longer, with jitter) and retry, with the "
    "same `Idempotency-Key` for a `POST`",
    "http_error": "any other HTTP error the framework raises (not expected)",
}
# Modules whose errors are not the API's: the client prints its own, the simulators copy the
# providers', the doctor reports checks.
NOT_THE_API = ("client", "simulators", "doctor")


def _resolve(node: ast.expr, module: Any) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return getattr(module, node.id, None)
    if isinstance(node, ast.Attribute):
        return getattr(_resolve(node.value, module), node.attr, None)
    return None


def error_codes() -> dict[str, set[int]]:
    """Every error code the API answers with, and its statuses, read from the code."""
    from app.api import errors as handlers
    from app.core.errors import AppError

    classes: dict[str, type[AppError]] = {}
    pending: list[type[AppError]] = [AppError]
    while pending:
        cls = pending.pop()
        classes[cls.__name__] = cls
        pending += cls.__subclasses__()
    codes: dict[str, set[int]] = {}
    for cls in classes.values():
        codes.setdefault(cls.code, set()).add(cls.status_code)
    for status, code in handlers._HTTP_CODES.items():
        codes.setdefault(code, set()).add(status)
    codes.setdefault("http_error", set())  # _on_http_error's fallback: any other status
    for path in sorted(APP.rglob("*.py")):
        relative = path.relative_to(APP)
        if relative.parts[0] in NOT_THE_API or relative.name == "__main__.py":
            continue
        module = importlib.import_module(".".join(("app", *relative.with_suffix("").parts)))
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = (
                node.func.attr
                if isinstance(node.func, ast.Attribute)
                else getattr(node.func, "id", "")
            )
            if name in classes:
                for keyword in node.keywords:
                    if keyword.arg == "code":
                        code = _resolve(keyword.value, module)
                        codes.setdefault(code, set()).add(classes[name].status_code)
            elif name == "error_response" and len(node.args) >= 2:
                status, code = (_resolve(a, module) for a in node.args[:2])
                if isinstance(status, int) and isinstance(code, str):
                    codes.setdefault(code, set()).add(status)
    return codes


def errors() -> str:
    codes = error_codes()
    missing = sorted(set(codes) - set(WHEN))
    gone = sorted(set(WHEN) - set(codes))
    if missing or gone:
        raise ReferenceError(
            f"error codes without a sentence in WHEN: {missing}; in WHEN but never answered: {gone}"
        )
    rows = sorted(
        (
            (min(s) if s else 999, ", ".join(map(str, sorted(s))) or "any", c)
            for c, s in codes.items()
        ),
    )
    example = {
        "error": {
            "code": "validation_error",
            "message": "gpu_count: Input should be greater than or equal to 1",
            "details": [
                {"field": "gpu_count", "message": "Input should be greater than or equal to 1"}
            ],
        }
    }
    return _page(
        "Error codes",
        'Every error the API answers has the same JSON shape, `{"error": {"code", '
        '"message", "details"?}}`:',
        f"```json\n{json.dumps(example, indent=2)}\n```",
        "`details` is present only where it helps (validation errors, as a list of `{field, "
        "message}`; `field` is a dotted path such as `providers.0`, or `body` for the body as a "
        "whole). Your input is never echoed back: where a message names what you sent, it "
        "quotes at most its first 40 characters, with control and format characters escaped.",
        "Branch on `code`, never on `message`. Every code the service answers with, read from "
        "its exceptions (`app/core/errors.py`) and error handlers (`app/api/`):",
        _table(["Status", "`code`", "When"], [(s, _code(c), WHEN[c]) for _o, s, c in rows]),
        "A `401` carries `WWW-Authenticate: Bearer`; a `503 overloaded` and a `429 "
        "too_many_placements` carry `Retry-After`.",
    )


# --- events -------------------------------------------------------------------------------

# What each type of the event stream (and webhook) says happened.
EVENT_TYPES = {
    "order.placed": "the order was placed and waits for stock",
    "order.deploying": "matching stock: one hour held, the create sent to the provider",
    "order.deployed": "the provider accepted the create: `data.deployment` has provider, "
    "region, instance type, VM id and the price with fees",
    "order.running": "the VM runs: `data.deployment.ip` is set",
    "order.failed": "the provider refused the order's request outright (it will not work by "
    "waiting)",
    "order.cancelled": "its owner cancelled the order",
    "order.expired": "the order's `expires_at` passed before stock appeared",
    "order.terminating": "a terminate was committed (`data.terminate_reason`); the delete is on "
    "its way",
    "order.terminated": "the provider shows the machine gone: `data.charged_usd` is what it "
    "cost in all, the unused part refunded",
    "order.lost": "the provider ended the machine by itself (gone, failed or suspended); "
    "billing stopped when it was seen",
    "order.node_lost": "the provider lost a node of the order's cluster: `data.machines` shows "
    "each node's state; the rest runs on (or is terminated, with `on_node_lost: terminate`)",
    "order.progress": "the machine reported a new stage (`data.deployment.stage`: booted, "
    "driver_ok, image_pulled, engine_starting, downloading, healthy), once a stage; "
    "`data.deployment.progress` has a download's bytes",
    "order.ready": "the machine reported `ready`: its model answered a completion "
    "(`data.deployment.ready_at`; `data.serve_tunnel` reaches it)",
    "order.not_ready": "the machine reported `failed`: `data.deployment.stage_detail` says the "
    "cause and what it said",
    "order.note": "any other line of the order's timeline: it still waits or deploys (no "
    "capacity this time, above your price, short of funds, a rate limit...); `kind` says which",
    "account.credited": "a top-up was credited to the account",
    "account.low_balance": "the account's available balance pays its machines for fewer than "
    "`AUTOPROVISION_LOW_BALANCE_HOURS`; once per crossing",
    "account.webhook_endpoint_disabled": "a webhook endpoint was disabled (a `410`, or no "
    "successful delivery for `AUTOPROVISION_WEBHOOK_DISABLE_AFTER_HOURS`)",
}


def account_event_kinds() -> set[str]:
    """The kinds of the account's own events, read from the calls that add them."""
    kinds = set()
    for path in sorted((APP / "services").rglob("*.py")):
        module = importlib.import_module(
            ".".join(("app", *path.relative_to(APP).with_suffix("").parts))
        )
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "account_events"
            ):
                for keyword in node.keywords:
                    if keyword.arg == "kind":
                        kinds.add(str(_resolve(keyword.value, module)))
    return kinds


def event_types() -> list[str]:
    """Every type the event stream and the webhooks send."""
    from app.core.states import ORDER_EVENT_TYPES, ORDER_NOTE, WebhookEventType

    types = [*ORDER_EVENT_TYPES.values(), ORDER_NOTE]
    types += [f"account.{kind}" for kind in sorted(account_event_kinds())]
    types += [t.value for t in WebhookEventType if t.value not in types]
    return types


def _schema_type(prop: Mapping[str, Any]) -> str:
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in prop:
        kinds = [_schema_type(p) for p in prop["anyOf"]]
        return " or ".join(k for k in kinds if k != "null") + (
            " or null" if "null" in kinds else ""
        )
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if prop.get("type") == "array":
        return f"list of {_schema_type(prop.get('items', {}))}"
    if prop.get("format") == "date-time":
        return "time (ISO 8601)"
    return str(prop.get("type", "any"))


def _fields(model: Any, mode: str = "serialization") -> str:
    schema = model.model_json_schema(mode=mode)
    notes: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if cls.__module__.startswith("app."):
            notes.update(_source_notes(cls))
    rows = []
    for name, prop in schema["properties"].items():
        rows.append(
            (_code(name), _schema_type(prop), prop.get("description") or notes.get(name, ""))
        )
    return _table(["Field", "Type", "Meaning"], rows)


def events() -> str:
    from app.api.routes.events import EventOut
    from app.core.states import ORDER_EVENT_TYPES, ORDER_NOTE, OrderEventKind, WebhookEventType
    from app.services.order_payload import DeploymentOut, OrderSnapshotOut

    types = event_types()
    missing = sorted(set(types) - set(EVENT_TYPES))
    gone = sorted(set(EVENT_TYPES) - set(types))
    if missing or gone:
        raise ReferenceError(
            f"event types without a sentence in EVENT_TYPES: {missing}; never sent: {gone}"
        )
    webhooks = {t.value for t in WebhookEventType}
    kinds = _members(OrderEventKind)
    return _page(
        "Events and payloads",
        "Everything that happens to an order is a line of its timeline (`GET "
        "/v1/orders/{id}/events`), and an event of its account: on the event stream (`GET "
        "/v1/events/stream`, and a page at a time from `GET /v1/events`) and, for the types "
        "marked below, as a webhook. How to follow them: [the event stream](../guides/events.md) "
        "and [webhooks](../guides/webhooks.md).",
        "## Types",
        _table(
            ["`type`", "When", "Webhook"],
            [(_code(t), EVENT_TYPES[t], "yes" if t in webhooks else "") for t in types],
        ),
        "## Timeline kinds",
        "Each line of an order's timeline has a `kind`; the stream's `type` follows from it "
        f"(every kind not listed with a type is an `{ORDER_NOTE}`):",
        _table(
            ["`kind`", "Stream `type`", "What it says"],
            [
                (_code(v), _code(ORDER_EVENT_TYPES.get(OrderEventKind(v), ORDER_NOTE)), n)
                for v, n in kinds
            ],
        ),
        "## The stream's events",
        "`GET /v1/events/stream` sends each as a Server-Sent Event whose `id` is the event's, "
        "`event` its `type` and `data` this JSON object (`GET /v1/events` pages hold the same "
        "objects):",
        _fields(EventOut),
        "## Webhook bodies",
        'A standard endpoint gets `{"type", "timestamp", "data"}`: the `type` above, when '
        "it was sent, and for order events the order as `data` (below). `account.low_balance` "
        'has `data` `{"id", "name", "available", "hourly_spend", "runway_hours"}`. '
        "Slack and Discord endpoints get a sentence instead ([Slack and "
        "Discord](../guides/chat.md)).",
        "## The order in an event",
        "What `data` holds for order events, on the stream and in webhooks: the order as `GET "
        "/v1/orders/{id}` shows it at that moment, but with its SSH key only as "
        "`ssh_key_fingerprint` (events are kept 30 days).",
        _fields(OrderSnapshotOut),
        "`deployment`, the latest create attempt and its machine:",
        _fields(DeploymentOut),
    )


# --- GPU models ---------------------------------------------------------------------------


def catalogue() -> str:
    from app.core.catalogue import GPU_MODELS, Interconnect
    from app.providers.registry import offered

    return _page(
        "GPU models",
        "`GET /v1/catalogue` (no key needed) lists the GPU models, providers and interconnects "
        "orders may name; each provider says whether this service can deploy there "
        '(`"enabled"`: it has credentials for it). An order\'s `gpu_model` is one of these '
        'names, case-insensitive (`"b300"` becomes `"B300"`; `providers` and '
        "`interconnect` ignore case too). An unknown name is a `422` whose message lists the "
        "known ones.",
        _table(["Name", "GPU"], [(_code(k), v) for k, v in GPU_MODELS.items()]),
        "Providers: " + ", ".join(f"{_code(s.name)} ({s.display_name})" for s in offered()) + ".",
        "Interconnects: " + ", ".join(_code(i.value) for i in Interconnect) + " (`nvlink` "
        "accepts SXM boards too).",
    )


# --- the pages ----------------------------------------------------------------------------

PAGES: dict[str, Callable[[], str]] = {
    "configuration.md": configuration,
    "cli.md": cli,
    "api.md": api,
    "openapi.json": openapi_json,
    "states.md": states,
    "errors.md": errors,
    "events.md": events,
    "catalogue.md": catalogue,
}


# Files outside docs/reference/ made the same way, by their path from the repository's root.
FILES: dict[str, Callable[[], str]] = {".env.example": env_example}


def generate() -> dict[str, str]:
    """Every generated file by its path from the repository's root, as the code has it now."""
    pages = {f"docs/reference/{name}": make() for name, make in PAGES.items()}
    return pages | {path: make() for path, make in FILES.items()}


def stale(root: Path = ROOT) -> list[str]:
    """The generated files under `root` that differ from what the code says (or are missing)."""
    return sorted(
        path
        for path, text in generate().items()
        if not (root / path).is_file() or (root / path).read_text() != text
    )


def write(root: Path = ROOT) -> list[str]:
    """Write the generated files that changed; return their paths."""
    changed = []
    for path, text in generate().items():
        target = root / path
        if not target.is_file() or target.read_text() != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    if args.check:
        out_of_date = stale()
        for path in out_of_date:
            sys.stderr.write(f"{path} is out of date: run `make reference`\n")
        return 1 if out_of_date else 0
    for path in write():
        sys.stdout.write(f"wrote {path}\n")
    return 0


def on_pre_build(config: Any) -> None:
    """MkDocs hook: refuse to build the site from reference pages the code has moved past."""
    from mkdocs.exceptions import PluginError

    out_of_date = stale()
    if out_of_date:
        raise PluginError("out of date, run `make reference`: " + ", ".join(out_of_date))


if __name__ == "__main__":
    sys.exit(main())
