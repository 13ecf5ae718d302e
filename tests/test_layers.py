"""Packages import one way: read from the source (an AST walk), not from what happens to load."""

import ast
import sys
from collections import defaultdict
from collections.abc import Collection, Iterator
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"
# The composition root: the only modules directly under `app/` (the command is `app/cli/`,
# the settings `app/settings/`).
TOP_LEVEL = {"__init__", "__main__", "main", "background"}
# Each wing, and the wings it may import (besides itself). Those not listed (the composition
# root, the CLI, the doctor, demo mode) sit above them all.
MAY_IMPORT = {
    "core": set(),
    "open_models": {"core"},
    "stock": {"core"},
    "support": {"core"},
    "settings": {"core", "open_models"},
    "storage": {"core", "support"},
    "providers": {"core", "support", "settings"},
    "simulators": {"core", "support", "providers"},
    "services": {"core", "open_models", "stock", "storage", "support", "settings", "providers"},
    "stream": {"core", "storage", "support", "settings", "services"},
    "webhooks": {"core", "storage", "support", "settings", "providers", "services", "stream"},
    "watcher": {"core", "stock", "storage", "support", "settings", "providers", "services"},
    "api": {
        "core",
        "open_models",
        "stock",
        "storage",
        "support",
        "settings",
        "providers",
        "services",
        "stream",
    },
}
# Production code reaches the simulators only through demo mode and the `sim` command.
MAY_IMPORT_SIMULATORS = {"simulators", "demo", "cli"}


def part_of(path: Path) -> str:
    """The top-level part of `app` a source file belongs to (`services`, `storage`, ...)."""
    relative = path.relative_to(APP)
    return relative.parts[0].removesuffix(".py")


def imported_names(path: Path) -> Iterator[str]:
    """The dotted names a file imports (at module level, inside functions or for type checks)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def imports_of(path: Path) -> set[str]:
    """The top-level parts of `app` this file imports."""
    found = set()
    for name in imported_names(path):
        parts = name.split(".")
        if (
            parts[0] == "app" and len(parts) > 1 and (APP / parts[1]).with_suffix(".py").exists()
        ) or (parts[0] == "app" and len(parts) > 1 and (APP / parts[1]).is_dir()):
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


def test_each_wing_imports_only_those_below_it() -> None:
    edges = graph()
    wrong = [
        f"{source} imports {target} ({', '.join(files)})"
        for source, allowed in MAY_IMPORT.items()
        for target, files in edges[source].items()
        if target not in allowed
    ]
    assert wrong == []


def test_only_demo_mode_and_the_sim_command_import_the_simulators() -> None:
    edges = graph()
    wrong = [
        f"{source} imports the simulators ({', '.join(edges[source]['simulators'])})"
        for source in sorted(edges)
        if "simulators" in edges[source] and source not in MAY_IMPORT_SIMULATORS
    ]
    assert wrong == []


def test_the_top_level_holds_only_the_composition_root() -> None:
    modules = {path.stem for path in APP.glob("*.py")}
    assert modules == TOP_LEVEL and len(modules) <= 6
    wings = {path.name for path in APP.iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert wings - set(MAY_IMPORT) <= {"cli", "client", "dashboard", "demo", "doctor"}


def module_of(path: Path) -> str:
    """The dotted name of a source file (`app.core.states`, `app.storage` for its __init__)."""
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, modules: Collection[str]) -> set[str]:
    """The modules of `app` a file imports: `from a import b` names `a.b` if that is a module,
    else `a` (a package's `__init__` runs first either way, and counts only when named)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules else node.module)
    return found & set(modules)


def module_graph() -> dict[str, set[str]]:
    """module -> the modules of `app` it imports."""
    modules = {module_of(path): path for path in sorted(APP.rglob("*.py"))}
    return {module: imported_modules(path, modules) - {module} for module, path in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_among_the_modules() -> None:
    assert cycles(module_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    """Positive control: a loop through three modules is found, a chain is not."""
    loop = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(loop) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    edges = module_graph()
    assert "app.core.states" in edges["app.storage.models.orders"]


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
    assert "services" in edges["api"] and "storage" in edges["services"]


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
