"""`POST /v1/core/virtual-machines`: validation, money, stock, faults, then VMs that boot."""

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from app.simulators.hyperstack.catalog import IMAGES
from app.simulators.hyperstack.images import refusal
from app.simulators.hyperstack.simulator import (
    HyperstackSimulator,
    SimEnvironment,
    bad_request,
    error,
    json_object,
    not_found,
    ok,
)
from app.simulators.vms import CatalogEntry

MAX_COUNT = 20
MAX_NAME = 50
RULE_KEYS = ("direction", "ethertype", "protocol", "remote_ip_prefix")
IMAGE_NAMES = {name for _, name, _, _ in IMAGES}


@dataclass
class CreateRequest:
    """A create body that passed validation, with what it refers to looked up."""

    name: str
    count: int
    environment: SimEnvironment
    entry: CatalogEntry
    details: dict[str, Any]
    labels: list[str]


def _validate_fields(body: dict[str, Any]) -> str | None:
    for key in ("name", "environment_name", "flavor_name", "key_name"):
        if not isinstance(body.get(key), str) or not body[key]:
            return f"{key} is required"
    if len(body["name"]) > MAX_NAME:
        return f"name must be at most {MAX_NAME} characters"
    count = body.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        return f"count must be an integer from 1 to {MAX_COUNT}"
    if not isinstance(body.get("image_name"), str) or not body["image_name"]:
        return "image_name is required when not booting from a volume"
    labels = body.get("labels", [])
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        return "labels must be a list of strings"
    rules = body.get("security_rules", [])
    if not isinstance(rules, list) or not all(
        isinstance(rule, dict) and all(isinstance(rule.get(k), str) for k in RULE_KEYS)
        for rule in rules
    ):
        return "each security rule needs direction, ethertype, protocol and remote_ip_prefix"
    if not isinstance(body.get("assign_floating_ip", False), bool):
        return "assign_floating_ip must be a boolean"
    if not isinstance(body.get("user_data") or "", str):
        return "user_data must be a string"
    return None


def _parse(sim: HyperstackSimulator, body: dict[str, Any]) -> CreateRequest | Response:
    problem = _validate_fields(body)
    if problem is not None:
        return bad_request(problem)
    environment = sim.environments.get(body["environment_name"])
    if environment is None:
        return not_found(f"Environment {body['environment_name']} not found")
    flavor = body["flavor_name"]
    entry = sim.entry(flavor, environment.region)
    if entry is None:
        if sim.flavor_in_any_region(flavor):
            return bad_request(f"Flavor {flavor} is not available in {environment.region}")
        return not_found(f"Flavor {flavor} not found")
    if sim.keypair(body["key_name"], environment.name) is None:
        return not_found(f"Keypair {body['key_name']} not found in {environment.name}")
    if body["image_name"] not in IMAGE_NAMES:
        return not_found(f"Image {body['image_name']} not found in {environment.region}")
    refused = refusal(body["image_name"], entry)
    if refused is not None:
        return bad_request(refused)
    details = {
        "environment": environment,
        "image_name": body["image_name"],
        "key_name": body["key_name"],
        "assign_floating_ip": body.get("assign_floating_ip", False),
        "callback_url": body.get("callback_url"),
        "user_data": body.get("user_data"),
        "security_rules": [
            {k: rule.get(k) for k in (*RULE_KEYS, "port_range_min", "port_range_max")}
            for rule in body.get("security_rules", [])
        ],
    }
    return CreateRequest(
        body["name"], body["count"], environment, entry, details, list(body.get("labels", []))
    )


def _injected_refusal(sim: HyperstackSimulator, body: dict[str, Any]) -> Response | None:
    """A queued `create_refused` fault's answer to this create, whatever its body."""
    flavor, name = body.get("flavor_name"), body.get("name")
    environment = sim.environments.get(str(body.get("environment_name")))
    return sim.refused_create(
        sku=flavor if isinstance(flavor, str) else None,
        region=environment.region if environment is not None else None,
        name=name if isinstance(name, str) else None,
    )


async def create_vms(sim: HyperstackSimulator, request: Request) -> Response:
    """Create `count` VMs of one flavor in the environment's region."""
    body = await json_object(request)
    refused = _injected_refusal(sim, body or {})
    if refused is not None:
        return refused
    if body is None:
        sim.record_create(sku=None, region=None, name=None, outcome="rejected")
        return bad_request("Request body must be a JSON object")
    parsed = _parse(sim, body)
    if isinstance(parsed, Response):
        name, flavor = body.get("name"), body.get("flavor_name")
        sim.record_create(
            sku=flavor if isinstance(flavor, str) else None,
            region=None,
            name=name if isinstance(name, str) else None,
            outcome="rejected",
        )
        return parsed
    entry, count = parsed.entry, parsed.count

    def record(outcome: str, vm_id: str | None = None) -> None:
        sim.record_create(
            sku=entry.sku,
            region=entry.region,
            name=parsed.name,
            outcome=outcome,
            vm_id=vm_id,
            startup_script=parsed.details["user_data"],
            image=parsed.details["image_name"],
        )

    hourly = sim.hourly_price(entry, floating_ip=parsed.details["assign_floating_ip"])
    if sim.balance < hourly * count:
        record("insufficient_funds")
        return bad_request("Insufficient balance to create the resource")
    out_of_stock = error(409, f"Flavor {entry.sku} is out of stock in {entry.region}", "conflict")
    if sim.faults.take("capacity_race") is not None:
        record("capacity_race")
        return out_of_stock
    if sim.in_stock(entry) < count:
        record("no_capacity")
        return out_of_stock
    vms = []
    for n in range(count):
        sim.take_one(entry)
        name = parsed.name if count == 1 else f"{parsed.name}-{n + 1}"
        vm = sim.new_vm(sim.next_vm_id(), entry, name=name, tags=parsed.labels)
        vm.details = dict(parsed.details)
        vm.price_per_hour = hourly
        vms.append(vm)
    if sim.faults.take("create_error_after_commit") is not None:
        record("error_after_commit", vms[0].id)
        return sim.server_error_response()
    record("created", vms[0].id)
    await sim.faults.delay("create_delay")
    return ok(
        f"Creating {count} virtual machine(s).",
        instances=[sim.instance_fields(vm) for vm in vms],
    )
