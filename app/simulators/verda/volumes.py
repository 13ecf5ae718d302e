"""`/v1/volumes`: the volumes Verda keeps apart from instances and clusters (OS volumes, a
cluster's shared volume), listed, read and deleted as its document describes them."""

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from app.simulators.verda.simulator import USER_ID, VerdaSimulator, error, iso_time
from app.simulators.verda.wire import authed, invalid, json_body
from app.simulators.volumes import ATTACHED, DELETED, TRASH, SimVolume

UNKNOWN_ID = "Volume not found"
# A volume lives in one location and one contract; its device name on the machine (a guess).
TARGETS = {True: "vda", False: "vdb"}
TRASH_LEAVES_OUT = ("created_by_user_id", "pseudo_path", "create_directory_command",
                    "mount_command", "filesystem_to_fstab_command", "long_term")  # fmt: skip


def volume_json(sim: VerdaSimulator, volume: SimVolume) -> dict[str, Any]:
    """`GET /v1/volumes[/{id}]`'s object (the trash adds `deleted_at`)."""
    attached = volume.status == ATTACHED
    owner = volume.vm_id or volume.cluster_id
    shown = {
        "id": volume.id,
        "instance_id": owner if attached else None,
        "instances": [owner] if attached and owner else [],
        "name": volume.name,
        "created_at": iso_time(volume.created_at),
        "created_by_user_id": USER_ID,
        "status": "deleted" if volume.status == TRASH else volume.status,
        "size": volume.size_gb,
        "is_os_volume": volume.is_os_volume,
        "target": TARGETS[volume.is_os_volume] if attached else None,
        "type": volume.type,
        "location": volume.location,
        "ssh_key_ids": [],
        "pseudo_path": None,
        "create_directory_command": None,
        "mount_command": None,
        "filesystem_to_fstab_command": None,
        "contract": "PAY_AS_YOU_GO",
        "base_hourly_cost": float(volume.hourly_price),
        "monthly_price": float(volume.hourly_price * 730),
        "currency": "usd",
        "long_term": None,
        "tags": volume.tags,
    }
    if volume.status == TRASH:  # the trash's own shape: no mount commands, no owner
        for name in TRASH_LEAVES_OUT:
            shown.pop(name)
        shown["deleted_at"] = iso_time(volume.trashed_unix or volume.created_at)
        shown["is_permanently_deleted"] = False
    return shown


def volume_routes(sim: VerdaSimulator) -> list[BaseRoute]:
    """GET/PUT `/v1/volumes`, GET `/v1/volumes/trash`, GET/DELETE `/v1/volumes/{id}`."""

    def live(volume_id: str) -> SimVolume | None:
        sim.settle()  # the trash emptied as of now
        volume = sim.volumes.get(volume_id)
        return None if volume is None or volume.status == DELETED else volume

    async def list_volumes(request: Request) -> Response:
        sim.settle()
        wanted = request.query_params.get("status")
        shown = [
            volume_json(sim, v)
            for v in sim.volumes.values()
            if v.status not in (TRASH, DELETED) and (wanted is None or v.status == wanted)
        ]
        return JSONResponse(shown)

    async def trash(_request: Request) -> Response:
        sim.settle()
        return JSONResponse(
            [volume_json(sim, v) for v in sim.volumes.values() if v.status == TRASH]
        )

    async def get_volume(request: Request) -> Response:
        volume = live(request.path_params["volume_id"])
        if volume is None:
            return error(404, "not_found", UNKNOWN_ID)
        return JSONResponse(volume_json(sim, volume))

    def delete(volume_id: str, permanently: bool) -> Response | None:
        """Verda's refusal of deleting this volume, or None when it is done."""
        volume = live(volume_id)
        if volume is None:
            return error(404, "not_found", UNKNOWN_ID)
        if volume.status == ATTACHED:  # "volumes attached to instances must be offline first"
            return error(403, "forbidden_action", "Can't delete an attached volume")
        volume.delete(sim.clock(), permanently=permanently)
        return None

    async def delete_volume(request: Request) -> Response:
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        refused = delete(request.path_params["volume_id"], body.get("is_permanent") is True)
        return refused or Response(status_code=202)

    async def volume_action(request: Request) -> Response:
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        if body.get("action") != "delete":
            return invalid("The simulator performs the delete action on volumes only")
        ids = body.get("id")
        ids = [ids] if isinstance(ids, str) else ids
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            return invalid("id should not be empty")
        for volume_id in ids:  # all or nothing: every refusal before anything is deleted
            volume = live(volume_id)
            if volume is None:
                return error(404, "not_found", UNKNOWN_ID)
            if volume.status == ATTACHED:
                return error(403, "forbidden_action", "Can't delete an attached volume")
        for volume_id in ids:
            delete(volume_id, body.get("is_permanent") is True)
        return Response(status_code=202)

    return [
        Route("/v1/volumes", authed(sim, list_volumes), methods=["GET"]),
        Route("/v1/volumes", authed(sim, volume_action), methods=["PUT"]),
        Route("/v1/volumes/trash", authed(sim, trash), methods=["GET"]),
        Route("/v1/volumes/{volume_id}", authed(sim, get_volume), methods=["GET"]),
        Route("/v1/volumes/{volume_id}", authed(sim, delete_volume), methods=["DELETE"]),
    ]
