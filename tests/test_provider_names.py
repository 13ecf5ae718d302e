"""Adding a provider is its package plus one line in the list of specs: nothing else in `app/`
names a provider, in code or in the dashboard's assets (comments and docstrings may, as
examples)."""

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from app.providers.registry import SPECS

APP = Path(__file__).resolve().parent.parent / "app"
NAMES = sorted({n.lower() for spec in SPECS for n in (spec.name, spec.display_name)})
PATTERN = re.compile("|".join(map(re.escape, NAMES)), re.IGNORECASE)
# The places that may: each provider's package and its simulator's, and the list of specs.
ALLOWED = [
    APP / "providers" / "registry.py",
    APP / "simulators" / "registry.py",
    *(APP / "providers" / spec.name for spec in SPECS),
    *(APP / "simulators" / spec.name for spec in SPECS),
]


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring nodes (a module's, a class's, a function's first string)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def names_in_code(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every identifier and string literal but docstrings."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield line, node.value
        elif isinstance(node, ast.Name):
            yield line, node.id
        elif isinstance(node, ast.Attribute):
            yield line, node.attr
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield line, node.name
        elif isinstance(node, ast.arg):
            yield line, node.arg
        elif isinstance(node, ast.keyword):
            yield line, node.arg or ""
        elif isinstance(node, ast.alias):
            yield line, f"{node.name} {node.asname or ''}"
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield line, node.module


def _allowed(path: Path) -> bool:
    return any(path == place or place in path.parents for place in ALLOWED)


def test_the_scan_sees_what_it_looks_for() -> None:
    source = '"""Verda is fine here."""\nx = settings.verda_image  # and here: Hyperstack\n'
    found = [text for _, text in names_in_code(source) if PATTERN.search(text)]
    assert found == ["verda_image"]
    assert PATTERN.search('f"{url}/QuantaCloud/api"')
    assert {"verda", "hyperstack", "quantacloud", "fake"} <= set(NAMES)


def test_no_module_outside_the_provider_packages_names_a_provider() -> None:
    offending = [
        f"{path.relative_to(APP.parent)}:{line}: {text!r}"
        for path in sorted(APP.rglob("*.py"))
        if not _allowed(path)
        for line, text in names_in_code(path.read_text())
        if PATTERN.search(text)
    ]
    assert offending == []


def test_the_dashboard_names_no_provider() -> None:
    assets = [p for p in (APP / "dashboard").rglob("*") if p.suffix in (".js", ".css", ".html")]
    assert assets
    offending = [
        f"{path.relative_to(APP.parent)}:{n}: {line.strip()}"
        for path in assets
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if PATTERN.search(line)
    ]
    assert offending == []
