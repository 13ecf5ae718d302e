"""Derive, from the providers' own OpenAPI documents, the part our contract tests check against.

    python scripts/derive_provider_specs.py [--specs DIR] [--out DIR] [--check]

Reads Verda's and Hyperstack's documents (`../shared/providers/specs/` by default) and writes
`tests/contract/specs/<provider>.json`: only the operations the adapters use (`USED`), the
component schemas they reach, and no vendor prose (descriptions, summaries, examples dropped:
their facts, not their words). Each file says where it came from (`x-derived`). The output is
deterministic, so deriving again from the same document changes nothing; a newer document in
the specs folder is picked up by running this again. `--check` fails if a derived file is not
what the documents give now.
"""

import argparse
import copy
import hashlib
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SPECS = ROOT.parent / "shared" / "providers" / "specs"
DEFAULT_OUT = ROOT / "tests" / "contract" / "specs"
METHODS = ("get", "put", "post", "delete", "patch")

# What each document is, where it came from (its folder's README says the same), and the
# operations (method, path as the document writes it) our adapters send.
SOURCES: dict[str, dict[str, Any]] = {
    "verda": {
        "file": "verda.openapi.json",
        "from": "github.com/gurdasnijor/effect-verda spec/verda.openapi.json @ "
        "805db07978f1267a1c6cb2db6d966c32ff923a03 (Verda Cloud Public API, "
        "https://api.verda.com/v1/openapi.json)",
        "as_of": "its newest changelog entry, 2026-09-25",
        "used": [
            ("post", "/v1/oauth2/token"),
            ("get", "/v1/balance"),
            ("get", "/v1/images"),
            ("get", "/v1/images/cluster"),
            ("get", "/v1/locations"),
            ("get", "/v1/instance-types"),
            ("get", "/v1/volume-types"),
            ("get", "/v1/cluster-types"),
            ("get", "/v1/instance-availability"),
            ("get", "/v1/instance-availability/{instance_type}"),
            ("get", "/v1/cluster-availability"),
            ("get", "/v1/cluster-availability/{cluster_type}"),
            ("get", "/v1/instances"),
            ("post", "/v1/instances"),
            ("put", "/v1/instances"),
            ("get", "/v1/instances/{instance_id}"),
            ("get", "/v1/clusters"),
            ("post", "/v1/clusters"),
            ("put", "/v1/clusters"),
            ("get", "/v1/clusters/{id}"),
            ("get", "/v1/volumes"),
            ("put", "/v1/volumes"),
            ("get", "/v1/volumes/trash"),
            ("get", "/v1/volumes/{volume_id}"),
            ("delete", "/v1/volumes/{volume_id}"),
            ("get", "/v1/ssh-keys"),
            ("post", "/v1/ssh-keys"),
            ("get", "/v1/scripts"),
            ("post", "/v1/scripts"),
            ("delete", "/v1/scripts/{scriptId}"),
        ],
        # The error body of every status an operation does not describe (the spec's error table).
        "errors": "#/components/schemas/PublicApiErrorResponseDto",
    },
    "hyperstack": {
        "file": "hyperstack.openapi.yaml",
        "from": "github.com/NexGenCloud/hyperstack-sdk-go api/openapi.yaml @ "
        "5c595382ac40f2a84d50bd13538f49178e6e0e85 (Infrahub-API, pulled by the SDK from "
        "https://infrahub-api-doc.nexgencloud.com/api.json)",
        "as_of": "the spec of SDK v1.52.3-alpha (the document has no changelog)",
        "used": [
            ("get", "/pricebook"),
            ("get", "/core/flavors"),
            ("get", "/core/stocks"),
            ("get", "/core/images"),
            ("get", "/core/environments"),
            ("post", "/core/environments"),
            ("get", "/core/keypairs"),
            ("post", "/core/keypairs"),
            ("get", "/core/virtual-machines"),
            ("post", "/core/virtual-machines"),
            ("get", "/core/virtual-machines/{vm_id}"),
            ("delete", "/core/virtual-machines/{vm_id}"),
            ("get", "/billing/user-credit/credit"),
        ],
        "errors": "#/components/schemas/ErrorResponseModel",
    },
}

# Keys that are vendor prose wherever they are a keyword (never when they name a property).
PROSE = frozenset(
    {"description", "summary", "example", "examples", "title", "x-codegen-request-body-name"}
)
# Objects whose keys are names the vendor chose (a property called `description` is a fact).
NAMED_MAPS = frozenset(
    {"properties", "patternProperties", "schemas", "responses", "content", "headers", "paths",
     "securitySchemes", "$defs", "definitions", "variables"}
)  # fmt: skip


def load(path: Path) -> dict[str, Any]:
    """A document in JSON or YAML."""
    text = path.read_text(encoding="utf-8")
    loaded = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    if not isinstance(loaded, dict):
        raise SystemExit(f"{path}: not an OpenAPI document")
    return loaded


def without_prose(node: Any, *, named: bool = False) -> Any:
    """`node` with every prose keyword dropped; the keys of named maps are kept as they are."""
    if isinstance(node, list):
        return [without_prose(item) for item in node]
    if not isinstance(node, dict):
        return node
    kept = {}
    for key, value in node.items():
        if not named and key in PROSE:
            continue
        kept[key] = without_prose(value, named=not named and key in NAMED_MAPS)
    return kept


def references(node: Any) -> Iterable[str]:
    """Every `$ref` in `node`."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref
        for value in node.values():
            yield from references(value)
    elif isinstance(node, list):
        for item in node:
            yield from references(item)


def resolve(document: dict[str, Any], ref: str) -> Any:
    """The object a local `$ref` (`#/components/schemas/X`) points at."""
    if not ref.startswith("#/"):
        raise SystemExit(f"non-local reference {ref!r} is not supported")
    node: Any = document
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def derive(name: str, document: dict[str, Any], digest: str) -> dict[str, Any]:
    """The part of `document` our adapters use, without prose, with its provenance."""
    source = SOURCES[name]
    paths: dict[str, Any] = {}
    for method, path in source["used"]:
        item = document.get("paths", {}).get(path, {})
        if method not in item:
            raise SystemExit(f"{name}: the document has no {method.upper()} {path}")
        entry = paths.setdefault(path, {})
        if "parameters" in item:  # parameters shared by the path's operations
            entry["parameters"] = copy.deepcopy(item["parameters"])
        entry[method] = copy.deepcopy(item[method])
    components: dict[str, Any] = {}
    pending = sorted({*references(paths), source["errors"]})
    seen: set[str] = set()
    while pending:
        ref = pending.pop()
        if ref in seen:
            continue
        seen.add(ref)
        target = resolve(document, ref)
        _, section, key = ref[2:].split("/", 2)
        components.setdefault(section, {})[key] = copy.deepcopy(target)
        pending.extend(sorted(set(references(target)) - seen))
    schemes = document.get("components", {}).get("securitySchemes")
    if schemes:
        components["securitySchemes"] = copy.deepcopy(schemes)
    derived = {
        "openapi": document["openapi"],
        "info": {"title": document["info"]["title"], "version": document["info"]["version"]},
        "servers": [{"url": server["url"]} for server in document.get("servers", [])],
        "paths": without_prose(paths, named=True),
        "components": {k: without_prose(v, named=True) for k, v in components.items()},
    }
    if "security" in document:
        derived["security"] = document["security"]
    for item in derived["paths"].values():  # a Response must have a description: an empty one
        for method in METHODS:
            for response in item.get(method, {}).get("responses", {}).values():
                response["description"] = ""
    derived["x-derived"] = {
        "source": source["file"],
        "from": source["from"],
        "as_of": source["as_of"],
        "sha256": digest,
        "by": "scripts/derive_provider_specs.py",
        "operations": len(source["used"]),
        "errors": source["errors"],
    }
    return derived


def rendered(derived: dict[str, Any]) -> str:
    """The derived document as committed: sorted keys, one level of indent, a final newline."""
    return json.dumps(derived, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--specs", type=Path, default=DEFAULT_SPECS)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true", help="fail if a derived file is stale")
    args = parser.parse_args(argv)
    stale = []
    for name, source in SOURCES.items():
        path = args.specs / source["file"]
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        text = rendered(derive(name, load(path), digest))
        target = args.out / f"{name}.json"
        if args.check:
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                stale.append(str(target))
            continue
        args.out.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        sys.stdout.write(
            f"{target}: {len(source['used'])} operations from {path.name} ({digest[:12]})\n"
        )
    if stale:
        sys.stdout.write(f"stale: {', '.join(stale)} (run scripts/derive_provider_specs.py)\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
