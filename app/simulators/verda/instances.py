"""`/v1/instances`: deploy, list, get and act on instances, with the create-path faults."""

import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from app.simulators.verda.catalog import ALL_TYPES, GPU_TYPES, LOCATION_CODES
from app.simulators.verda.images import IMAGES_BY_KEY, refusal
from app.simulators.verda.simulator import PENDING_STATUSES, VerdaSimulator, error
from app.simulators.verda.wire import (
    authed,
    create,
    invalid,
    json_body,
    keys_and_script_problem,
    required_strings_problem,
)
from app.simulators.vms import CatalogEntry, SimVM

REQUIRED_CREATE_FIELDS = ("instance_type", "image", "hostname", "location_code")
ACTIONS = frozenset(
    {"boot", "start", "shutdown", "delete", "discontinue", "hibernate", "configure_spot",
     "force_shutdown", "delete_stuck", "deploy", "transfer"}
)  # fmt: skip
SIMULATED_ACTIONS = frozenset(
    {"delete", "discontinue", "shutdown", "force_shutdown", "start", "boot"}
)
TAG_LIMIT = 10
DEFAULT_OS_VOLUME_GB = 50  # without `os_volume`: SkyPilot's default size (a guess at Verda's)
# A refusal's status -> its code: both known delete refusals are `forbidden_action` (dstack's
# Verda backend sees the code), which the document's error table answers with 403.
CODES = {400: "invalid_request", 403: "forbidden_action", 404: "not_found"}


def tagged(asked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tags as Verda keeps them: an id each, keys lower-cased."""
    return [
        {"id": f"tag_{uuid.uuid4().hex[:20]}", "key": t["key"].lower(), "value": t.get("value")}
        for t in asked
    ]


def instance_routes(sim: VerdaSimulator) -> list[BaseRoute]:
    """GET/POST/PUT `/v1/instances` and GET `/v1/instances/{id}`."""

    async def create_instance(request: Request) -> Response:
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        return await create(
            sim,
            body,
            kind="instance",
            sku_field="instance_type",
            problem=validate_create,
            catalog=sim.catalog,
            make=lambda entry: make_vm(body, entry=entry).id,
            answer=lambda vm_id: PlainTextResponse(vm_id, 202),
            unsellable=body.get("is_spot") is True,
        )

    def validate_create(body: dict[str, Any]) -> str | None:
        problem = required_strings_problem(body, REQUIRED_CREATE_FIELDS)
        if problem is not None:
            return problem
        if body["location_code"] not in LOCATION_CODES:
            return "Invalid location code"
        if body["instance_type"] not in GPU_TYPES:
            if body["instance_type"] in ALL_TYPES:
                return "The simulator deploys GPU instance types only"
            return "Invalid instance type"
        if body["image"] not in IMAGES_BY_KEY:
            return "Invalid image"
        refused = refusal(IMAGES_BY_KEY[body["image"]], body["instance_type"])
        if refused is not None:
            return refused
        os_volume = body.get("os_volume")
        if os_volume is not None:
            size = os_volume.get("size") if isinstance(os_volume, dict) else None
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                return "os_volume.size must be a positive integer (GB)"
        problem = keys_and_script_problem(sim, body)
        if problem is not None:
            return problem
        tags = body.get("tags") or []
        if not isinstance(tags, list) or len(tags) > TAG_LIMIT:
            return f"tags must be a list of at most {TAG_LIMIT} items"
        for tag in tags:
            if not isinstance(tag, dict) or not isinstance(tag.get("key"), str):
                return "each tag needs a string key"
            if not 0 < len(tag["key"]) <= 63 or len(str(tag.get("value") or "")) > 127:
                return "tag keys are 1-63 characters, values at most 127"
        return None

    def make_vm(body: dict[str, Any], *, entry: CatalogEntry) -> SimVM:
        tags = tagged(body.get("tags") or [])
        keys = body.get("ssh_key_ids") or []
        image = IMAGES_BY_KEY[body["image"]]
        vm = sim.new_vm(
            sim.new_instance_id(),
            entry,
            name=body["hostname"],
            tags=[t["key"] if t["value"] is None else f"{t['key']}={t['value']}" for t in tags],
        )
        vm.details.update(
            description=body.get("description") or "",
            image=image.image_type,
            os_name=image.details[0],
            startup_script_id=body.get("startup_script_id"),
            ssh_key_ids=[keys] if isinstance(keys, str) else list(keys),
            jupyter_token=uuid.uuid4().hex,
            tags=tags,
        )
        if entry.details.get("storage", {}).get("size_in_gigabytes") is None:  # not local disk
            os_volume = body.get("os_volume") or {}
            volume = sim.new_volume(
                name=os_volume.get("name") or f"{body['hostname']}-os",
                kind="NVMe",
                size_gb=os_volume.get("size") or DEFAULT_OS_VOLUME_GB,
                location=entry.region,
                vm_id=vm.id,
                is_os_volume=True,
                tags=tagged(os_volume.get("tags") or []),
            )
            vm.details["os_volume_id"] = volume.id
        return vm

    async def list_instances(request: Request) -> Response:
        params = request.query_params
        status = params.get("status")
        compute_id = params.get("computeId")
        tag_filters = [t.partition("=") for t in params.getlist("tag")]
        found = []
        for vm in sim.vms.values():
            if status is None and not sim.visible(vm):
                continue
            if status is not None and sim.vm_status(vm) != status:
                continue
            if compute_id is not None and vm.id != compute_id:
                continue
            if not all(has_tag(vm, key, sep, value) for key, sep, value in tag_filters):
                continue
            found.append(sim.instance_json(vm))
        return JSONResponse(found)

    def has_tag(vm: SimVM, key: str, sep: str, value: str) -> bool:
        return any(
            t["key"] == key.lower() and (not sep or t["value"] == value)
            for t in vm.details.get("tags", [])
        )

    async def get_instance(request: Request) -> Response:
        vm = sim.vms.get(request.path_params["instance_id"])
        if vm is None:
            return error(404, "not_found", "Invalid instance id")
        return JSONResponse(sim.instance_json(vm))

    async def instance_action(request: Request) -> Response:
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        action, ids = body.get("action"), body.get("id")
        ids = [ids] if isinstance(ids, str) else ids
        if not isinstance(action, str) or action not in ACTIONS:
            return invalid("Invalid action")
        if action not in SIMULATED_ACTIONS:
            return invalid(f"The simulator does not perform the {action} action")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            return invalid("id should not be empty")
        volume_ids = body.get("volume_ids")
        if volume_ids is not None and not (
            isinstance(volume_ids, list) and all(isinstance(v, str) for v in volume_ids)
        ):
            return invalid("volume_ids must be a list of volume ids")
        permanently = body.get("delete_permanently") is True
        results = [(vm_id, act(action, vm_id, volume_ids, permanently)) for vm_id in ids]
        if action in ("delete", "discontinue") and any(r == (202, "") for _, r in results):
            await sim.faults.delay("delete_delay")
        if len(results) == 1:
            outcome = results[0][1]
            if outcome is None:
                return Response(status_code=204)
            if outcome[0] >= 400:
                return error(outcome[0], CODES[outcome[0]], outcome[1])
        items = []
        for vm_id, outcome in results:
            item: dict[str, Any] = {"instanceId": vm_id, "action": action, "status": "success"}
            if outcome is not None and outcome[0] >= 400:
                item |= {"status": "error", "error": outcome[1], "statusCode": outcome[0]}
            items.append(item)
        failed = any(item["status"] == "error" for item in items)
        return JSONResponse(items, status_code=207 if failed else 202)

    def act(
        action: str, vm_id: str, volume_ids: list[str] | None, permanently: bool
    ) -> tuple[int, str] | None:
        """(status, message) for one instance; None when it is already in that state."""
        vm = sim.vms.get(vm_id)
        if vm is None:
            return (404, "Invalid instance id")
        status = sim.vm_status(vm)
        if action in ("delete", "discontinue"):
            if status == "deleting":
                return None
            refused = sim.faults.take("delete_refused") is not None
            if refused or status in PENDING_STATUSES:  # `ordered` is worded the same
                return (403, "Can't discontinue a provisioning instance")
            if status == "discontinued":
                return (403, "Can't discontinue a discontinued instance")
            sim.settle()
            vm.deleted = sim.clock()
            # No volume_ids: the OS volume goes to the trash (96 h, `delete_permanently` does
            # nothing without volume_ids), other volumes are detached. A list deletes what it
            # names (for good with `delete_permanently`) and detaches the rest: `[]` keeps all.
            for volume in sim.attached_to(vm_id=vm.id):
                named = volume.is_os_volume if volume_ids is None else volume.id in volume_ids
                if named:
                    volume.delete(vm.deleted, permanently=permanently and volume_ids is not None)
                else:
                    volume.detach()
            return (202, "")
        if action in ("shutdown", "force_shutdown"):
            if status == "offline":
                return None
            if status != "running":
                return (400, f"Can't shutdown a {status} instance")
            vm.details["offline"] = True
            return (202, "")
        if status == "running":
            return None
        if status != "offline":
            return (400, f"Can't start a {status} instance")
        vm.details["offline"] = False
        return (202, "")

    return [
        Route("/v1/instances", authed(sim, list_instances), methods=["GET"]),
        Route("/v1/instances", authed(sim, create_instance), methods=["POST"]),
        Route("/v1/instances", authed(sim, instance_action), methods=["PUT"]),
        Route("/v1/instances/{instance_id}", authed(sim, get_instance), methods=["GET"]),
    ]
