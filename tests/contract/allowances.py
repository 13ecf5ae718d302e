"""Where a provider's own API description is known to be wrong, or looser than its live API,
and how the contract checks read it instead. Each entry is one fact with its source; none turns
checking off. A null where the document says a value is allowed only where the provider's own
SDK types the field as optional or a source in ../shared/providers/ says the live API sends it.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NullAllowed:
    """`schema`'s property at `path` (dots between property names) may be null."""

    schema: str
    path: str
    source: str


# Verda's document is OpenAPI 3.1, where `nullable` means nothing; its generator (NestJS
# swagger) writes it for fields that may be null, so they are read as such (`_nullable_as_null`).
VERDA_NULLS = (
    NullAllowed(
        "GetInstanceResponsePublicApiDto",
        "os_volume_id",
        "verda SDK 1.25 `Instance.os_volume_id: str | None`: None until provisioned",
    ),
    NullAllowed(
        "GetInstanceResponsePublicApiDto",
        "startup_script_id",
        "verda SDK 1.25 `Instance.startup_script_id: str | None`",
    ),
    NullAllowed("GetClusterResponsePublicApiDto", "ip", "verda SDK 1.25 `Cluster.ip: str | None`"),
    NullAllowed(
        "GetClusterResponsePublicApiDto",
        "startup_script_id",
        "verda SDK 1.25 `Cluster.startup_script_id: str | None`",
    ),
    *(
        NullAllowed(
            volume, field, f"verda SDK 1.25 `Volume.{field}: str | None` (None when detached)"
        )
        for volume in ("GetVolumePublicResponseDto", "GetVolumeInTrashPublicResponseDto")
        for field in ("instance_id", "target")
    ),
    *(  # what a volume that is not a shared filesystem has none of
        NullAllowed(
            "GetVolumePublicResponseDto", field, f"verda SDK 1.25 `Volume.{field}: ... | None`"
        )
        for field in (
            "pseudo_path",
            "mount_command",
            "create_directory_command",
            "filesystem_to_fstab_command",
            "long_term",
        )
    ),
    NullAllowed("InstanceType", "p2p", "gpuhunt fixtures copied from live answers (verda.md §3)"),
    NullAllowed(
        "InstanceType", "deploy_warning", "gpuhunt fixtures copied from live answers (verda.md §3)"
    ),
)

# Hyperstack's document (3.0) says `nullable` nowhere; its SDK types every field Optional. These
# are the nulls its docs show in examples of live answers.
HYPERSTACK_NULLS = (
    NullAllowed("Flavor_Fields", "display_name", "docs example (hyperstack.md §2)"),
    NullAllowed(
        "New_Model_Response",
        "planned_7_days",
        "docs example; `planned_*` nullable (hyperstack.md §2)",
    ),
    NullAllowed(
        "New_Model_Response",
        "planned_30_days",
        "docs example; `planned_*` nullable (hyperstack.md §2)",
    ),
    NullAllowed(
        "New_Model_Response",
        "planned_100_days",
        "docs example; `planned_*` nullable (hyperstack.md §2)",
    ),
    NullAllowed("PricebookModel", "start_time", "docs pricebook example (hyperstack.md §3)"),
    NullAllowed("PricebookModel", "end_time", "docs pricebook example (hyperstack.md §3)"),
    NullAllowed(
        "Instance_Fields",
        "floating_ip",
        "null until attached: terraform and CoCalc poll for it (hyperstack.md §5)",
    ),
    NullAllowed("Instance_Fields", "callback_url", "InstanceFields example (hyperstack.md §5)"),
    NullAllowed("Instance_Fields", "contract_id", "InstanceFields example (hyperstack.md §5)"),
    NullAllowed(
        "Instance_Fields", "port_randomization_status", "InstanceFields example (hyperstack.md §5)"
    ),
    NullAllowed("Environments", "page", "`page` is null when not asked for (hyperstack.md §1)"),
    NullAllowed("Environments", "page_size", "as `page` (hyperstack.md §1)"),
    NullAllowed("Keypairs", "page", "`page` is null when not asked for (hyperstack.md §1)"),
    NullAllowed("Keypairs", "page_size", "as `page` (hyperstack.md §1)"),
    NullAllowed("Instances", "page", "`page` is null when not asked for (hyperstack.md §1)"),
    NullAllowed("Instances", "page_size", "as `page` (hyperstack.md §1)"),
)

# The creates of an SSH key, a start-up script and an instance answer the bare id as text, not
# the JSON string the document shows: both official SDKs read it so (verda SDK 1.25
# `_instances.py` `.post(...).text`, `_ssh_keys.py`, `_startup_scripts.py`; the Go SDK trims and
# keeps the text, verda.md §5). NestJS sends a returned string as text.
VERDA_BARE_IDS = (("post", "/v1/instances", "202"), ("post", "/v1/ssh-keys", "201"),
                  ("post", "/v1/scripts", "201"))  # fmt: skip
BARE_ID_TYPES = ("text/plain", "text/html")


def verda(document: dict[str, Any]) -> None:
    """Verda's document as the live API behaves."""
    # Numeric query defaults written as strings (`"default": "1"` on `type: number`): the
    # document fails its own schema (openapi-spec-validator); the numbers are meant.
    for schema in _schemas(document):
        default = schema.get("default")
        if schema.get("type") in ("number", "integer") and isinstance(default, str):
            schema["default"] = float(default) if "." in default else int(default)
    # `cf-connecting-ip` (and `user-agent`) marked required on mutating calls: Cloudflare sets
    # the first in front of the API, never a client (verda.md §1); a User-Agent is always sent.
    for operation in _operations(document):
        for parameter in operation.get("parameters", []):
            if parameter.get("in") == "header" and parameter.get("name") == "cf-connecting-ip":
                parameter["required"] = False
    _nullable_as_null(document)
    _allow_nulls(document, VERDA_NULLS)
    # A cluster's `worker_nodes` and `shared_volumes` are objects (verda SDK 1.25
    # `ClusterWorkerNode`, `SharedVolume`); `items: string` is the generator's default for an
    # array it was given no type for.
    cluster = document["components"]["schemas"]["GetClusterResponsePublicApiDto"]["properties"]
    cluster["worker_nodes"]["items"] = _object("id", "status", "hostname", "private_ip")
    cluster["shared_volumes"]["items"] = _object("id", "name", "size_in_gigabytes")
    # A 429's code, `rate_limit_exceeded`, is in the document's error table but not its enum.
    error = document["components"]["schemas"]["PublicApiErrorResponseDto"]["properties"]["code"]
    error["enum"].append("rate_limit_exceeded")
    for method, path, status in VERDA_BARE_IDS:
        content = document["paths"][path][method]["responses"][status].setdefault("content", {})
        for kind in BARE_ID_TYPES:
            content[kind] = {"schema": {"type": "string", "pattern": "^[0-9a-fA-F-]{36}$"}}


# Fields Hyperstack's Python SDK 1.56 (generated from a newer document than the Go SDK's
# v1.52.3, whose document we hold) reads: `hyperstack/models/*.py`.
_RESTRICTED_IMAGE = {
    "type": "object",
    "properties": {
        "constraints": {"type": "object", "nullable": True},
        "image_id": {"type": "integer"},
        "image_name": {"type": "string"},
        "link_type": {"type": "string", "enum": ["hard", "soft"]},
        "reason": {"type": "string", "nullable": True},
    },
}
HYPERSTACK_NEWER = {
    "Flavor_Fields": {  # `FlavorFields.image_restrictions: ImageRestrictions`
        "image_restrictions": {
            "type": "object",
            "nullable": True,
            "properties": {
                "compatible_images": {"type": "array", "items": _RESTRICTED_IMAGE},
                "has_image_restrictions": {"type": "boolean"},
                "restriction_type": {"type": "string", "nullable": True},
            },
        },
    },
    "Instance_Fields": {  # `InstanceFields`
        "cluster_id": {"type": "integer", "nullable": True},
        "dedicated_inference_id": {"type": "integer", "nullable": True},
        "enhanced_metrics": {
            "type": "object",
            "nullable": True,
            "properties": {"enabled": {"type": "boolean"}},
        },
    },
}


def hyperstack(document: dict[str, Any]) -> None:
    """Hyperstack's document as the live API behaves."""
    _allow_nulls(document, HYPERSTACK_NULLS)
    for schema, fields in HYPERSTACK_NEWER.items():
        document["components"]["schemas"][schema]["properties"].update(fields)
    # A security rule of a VM being created names no VM: the Python SDK (1.56, newer than the Go
    # SDK's document) has no `virtual_machine_id` in `CreateSecurityRulePayload`.
    rule = document["components"]["schemas"]["Create_Security_Rule_Payload"]
    rule["required"] = [name for name in rule["required"] if name != "virtual_machine_id"]
    # Pricebook amounts may come as decimal strings ("6.750000000"): CoCalc's types and a
    # third-party fixture read them so (hyperstack.md §3).
    price = document["components"]["schemas"]["PricebookModel"]["properties"]
    for name in ("value", "original_value"):
        price[name] = {"anyOf": [price[name], {"type": "string", "pattern": r"^\d+(\.\d+)?$"}]}


ALLOWANCES = {"verda": verda, "hyperstack": hyperstack}


def _object(*required: str) -> dict[str, Any]:
    return {"type": "object", "required": list(required)}


def _schemas(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _schemas(value)
    elif isinstance(node, list):
        for item in node:
            yield from _schemas(item)


def _operations(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for item in document["paths"].values():
        for method, operation in item.items():
            if method != "parameters":
                yield operation


def _nullable_as_null(document: dict[str, Any]) -> None:
    for schema in _schemas(document):
        if schema.pop("nullable", False) is True:
            _add_null(document, schema)


def _allow_nulls(document: dict[str, Any], allowed: tuple[NullAllowed, ...]) -> None:
    for entry in allowed:
        node = document["components"]["schemas"][entry.schema]
        for name in entry.path.split("."):
            node = node["properties"][name]
        _add_null(document, node)


def _add_null(document: dict[str, Any], schema: dict[str, Any]) -> None:
    """Let `schema` also be null, in the document's own dialect."""
    if document["openapi"].startswith("3.0"):
        if "$ref" in schema:
            ref = schema.pop("$ref")
            schema["allOf"] = [{"$ref": ref}]
        schema["nullable"] = True
        return
    if "$ref" in schema or "allOf" in schema or "oneOf" in schema or "anyOf" in schema:
        inner = dict(schema)
        schema.clear()
        schema["anyOf"] = [inner, {"type": "null"}]
        return
    kind = schema.get("type")
    if isinstance(kind, str):
        schema["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        kind.append("null")
    if "enum" in schema and None not in schema["enum"]:
        schema["enum"].append(None)
