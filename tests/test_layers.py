"""Packages import one way: read from the source (an AST walk), not from what happens to load."""

import ast
import sys
from collections import defaultdict
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"
# The layers the architecture doc names; each may import only those below it.
LAYERS = ("api", "watcher", "webhooks", "events", "services", "providers", "models")
FORBIDDEN = {
    "services": {"api", "watcher", "webhooks", "events", "schemas"},
    "providers": {"api", "watcher", "webhooks", "services", "models", "db"},
    "models": {"api", "watcher", "webhooks", "services", "providers", "db"},
    "webhooks": {"api", "watcher"},
    "events": {"api", "watcher", "webhooks"},
    "watcher": {"api", "webhooks"},
    # Offers, VMs, what orders want, fees and matching: the vocabulary every layer speaks.
    "market": {"api", "watcher", "webhooks", "services", "providers", "models", "db"},
    # The expected wait, the stock summary and the packing of stock days: pure arithmetic.
    "stock_stats": {"api", "watcher", "webhooks", "services", "providers", "models", "db"},
    "stock_summary": {"api", "watcher", "webhooks", "services", "providers", "models", "db"},
    "stock_days": {"api", "watcher", "webhooks", "services", "providers", "models", "db"},
}


def part_of(path: Path) -> str:
    """The top-level part of `app` a source file belongs to (`services`, `models`, ...)."""
    relative = path.relative_to(APP)
    return relative.parts[0].removesuffix(".py")


def imports_of(path: Path) -> set[str]:
    """The top-level parts of `app` this file imports (at module level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "app":
                names = [f"app.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "app" and len(parts) > 1:
                found.add(parts[1])
    return found


def graph() -> dict[str, dict[str, list[str]]]:
    """part -> imported part -> the files that import it."""
    edges: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(APP.rglob("*.py")):
        source = part_of(path)
        for target in imports_of(path) - {source}:
            edges[source][target].append(str(path.relative_to(APP.parent)))
    return edges


def test_no_layer_imports_one_above_it() -> None:
    edges = graph()
    wrong = [
        f"{source} imports {target} ({', '.join(files)})"
        for source, forbidden in FORBIDDEN.items()
        for target, files in edges[source].items()
        if target in forbidden
    ]
    assert wrong == []


def reachable(edges: dict[str, dict[str, list[str]]], start: str) -> set[str]:
    """Every layer `start` imports, directly or through other layers."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in edges[todo.pop()]:
            if target in LAYERS and target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_no_import_cycle_between_the_layers() -> None:
    edges = graph()
    cycles = [
        f"{a} and {b} import each other (through: {sorted(reachable(edges, a) & {b})})"
        for i, a in enumerate(LAYERS)
        for b in LAYERS[i + 1 :]
        if b in reachable(edges, a) and a in reachable(edges, b)
    ]
    assert cycles == []


SQL = {"select", "insert", "update", "delete", "text", "func", "bindparam"}


def test_sql_is_written_only_below_the_api_watcher_and_webhooks() -> None:
    """The watcher, webhooks and API call services for anything they read or write."""
    writers = []
    for layer in ("api", "watcher", "webhooks"):
        for path in sorted((APP / layer).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.ImportFrom) or node.module != "sqlalchemy":
                    continue
                if SQL & {alias.name for alias in node.names}:
                    writers.append(str(path.relative_to(APP.parent)))
    assert writers == []


def test_the_walk_sees_imports() -> None:
    """Positive control: the walk finds what is plainly there."""
    edges = graph()
    assert "services" in edges["api"] and "models" in edges["services"]


# The client commands speak to the service only through its REST API: they may import the
# standard library, these, and app.client itself; nothing of the server.
CLIENT_MAY_IMPORT = {"httpx", "httpx_sse", "typer", "rich"}


def modules_of(path: Path) -> set[str]:
    """Every module a file imports, by its full name (`..x` relative ones as `..x`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            prefix = module if module.endswith(".") else f"{module}."
            found |= {prefix + alias.name for alias in node.names} | {module}
    return found


def not_for_the_client(path: Path) -> list[str]:
    """The modules `path` imports that the client may not."""
    return [
        module
        for module in sorted(modules_of(path))
        if not (
            module.split(".")[0] in sys.stdlib_module_names | CLIENT_MAY_IMPORT
            or module in ("app", "app.client")  # `from app.client import x` names both
            or module.startswith("app.client.")
            or (module.startswith(".") and not module.startswith(".."))
        )
    ]


def test_the_client_imports_no_server_module() -> None:
    wrong = [
        f"{path.relative_to(APP.parent)} imports {module}"
        for path in sorted((APP / "client").rglob("*.py"))
        for module in not_for_the_client(path)
    ]
    assert wrong == []


def test_the_client_rule_sees_imports(tmp_path: Path) -> None:
    """Positive control: the client's own imports are seen, and server ones are refused."""
    seen = set().union(*(modules_of(p) for p in (APP / "client").rglob("*.py")))
    assert {"httpx", "httpx_sse", "typer", "rich.table", "app.client.api"} <= seen
    server = tmp_path / "server.py"
    server.write_text(
        "import json\nimport sqlalchemy\nfrom app.main import create_app\n"
        "from app.client import api\nfrom .. import settings\n"
    )
    refused = ["..", "..settings", "app.main", "app.main.create_app", "sqlalchemy"]
    assert not_for_the_client(server) == refused
