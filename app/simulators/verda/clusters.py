"""Verda's Instant Clusters at their real paths: cluster types, availability and images, and
`/v1/clusters` (deploy, list, get, discontinue), in the shapes the official SDK reads
(`verda.clusters`, `verda.cluster_types`). Plus `/_sim/clusters` to look at them."""

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from app.simulators.verda.catalog import LOCATION_CODES, LOCATIONS
from app.simulators.verda.cluster_catalog import (
    CLUSTER_TYPES,
    DEFAULT_SHARED_VOLUME_GB,
    SHARED_VOLUME_MOUNT,
)
from app.simulators.verda.images import (
    CLUSTER_IMAGES_BY_KEY,
    IMAGES_BY_KEY,
    refusal,
)
from app.simulators.verda.instances import tagged
from app.simulators.verda.simulator import USER_ID, VerdaSimulator, error, iso_time
from app.simulators.verda.wire import (
    authed,
    create,
    image_list,
    invalid,
    json_body,
    keys_and_script_problem,
    location_filter,
    required_strings_problem,
)
from app.simulators.vms import SimVM

REQUIRED_CREATE_FIELDS = ("cluster_type", "image", "hostname", "location_code")
CONTRACTS = frozenset({"PAY_AS_YOU_GO", "LONG_TERM", "SPOT"})
UNKNOWN_ID = "Invalid cluster id"


def cluster_json(sim: VerdaSimulator, cluster: SimVM) -> dict[str, Any]:
    """The cluster object of `GET /v1/clusters[/{id}]`, with the fields the SDK's `Cluster`
    reads: `ip` is the jump host's (null until the cluster runs), `worker_nodes` its nodes."""
    status = sim.cluster_status(cluster)
    shown = "reticulating_splines" if sim.faults.take("unknown_status") is not None else status
    details = cluster.details
    kind = CLUSTER_TYPES[cluster.entry.sku]
    return {
        "id": cluster.id,
        "hostname": cluster.name,
        "description": details.get("description", ""),
        "status": shown,
        "created_at": iso_time(cluster.created_at),
        "created_by_user_id": USER_ID,
        "location": cluster.entry.region,
        "cluster_type": cluster.entry.sku,
        "cpu": kind["cpu"],
        "gpu": kind["gpu"],
        "gpu_memory": kind["gpu_memory"],
        "memory": kind["memory"],
        "price_per_hour": float(cluster.hourly_price),
        "contract": "PAY_AS_YOU_GO",
        "image": details.get("image"),
        "os_name": details.get("os_name", ""),
        "startup_script_id": details.get("startup_script_id"),
        "ssh_key_ids": details.get("ssh_key_ids", []),
        "tags": details.get("tags", []),
        "ip": cluster.ip if status == "running" else None,
        "worker_nodes": [
            {
                "id": node["id"],
                # A node Verda lost shows `error` while the cluster runs on (a guess: Verda
                # documents no partial failure; `POST /_sim/clusters/{id}/nodes/{node}/end`).
                "status": "error" if node.get("lost") and status == "running" else status,
                "hostname": node["hostname"],
                "private_ip": node["private_ip"],
            }
            for node in details["worker_nodes"]
        ],
        "shared_volumes": [
            {
                "id": volume.id,
                "name": volume.name,
                "size_in_gigabytes": volume.size_gb,
                "mount_point": SHARED_VOLUME_MOUNT,
            }
            for volume in sim.volumes.values()
            if volume.id in details["shared_volume_ids"]
        ],
    }


def cluster_routes(sim: VerdaSimulator) -> list[BaseRoute]:
    """`/v1/cluster-types` (public), `/v1/cluster-availability[/{type}]`,
    `/v1/images/cluster`, GET/POST/PUT `/v1/clusters`, GET `/v1/clusters/{id}`, and the
    control API's `GET /_sim/clusters` and `POST /_sim/clusters/{id}/end`."""

    async def cluster_types(request: Request) -> Response:
        if request.query_params.get("currency", "usd").lower() != "usd":
            return invalid("The simulator prices in usd only")
        return JSONResponse(list(CLUSTER_TYPES.values()))

    def available(location: str) -> list[str]:
        return [
            name
            for (name, region), n in sim.stock.items()
            if region == location and n > 0 and (name, region) in sim.cluster_catalog
        ]

    async def availability(request: Request) -> Response:
        wanted = location_filter(request)
        return JSONResponse(
            [
                {"location_code": loc["code"], "availabilities": available(loc["code"])}
                for loc in LOCATIONS
                if wanted is None or loc["code"] == wanted
            ]
        )

    async def availability_of_type(request: Request) -> Response:
        name = request.path_params["cluster_type"]
        wanted = location_filter(request)
        codes = [loc["code"] for loc in LOCATIONS if wanted is None or loc["code"] == wanted]
        return JSONResponse(any(name in available(code) for code in codes))

    async def images(request: Request) -> Response:
        return image_list(request, cluster=True)

    async def create_cluster(request: Request) -> Response:
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        return await create(
            sim,
            body,
            kind="cluster",
            sku_field="cluster_type",
            problem=validate_create,
            catalog=sim.cluster_catalog,
            make=lambda entry: (
                make_cluster(body, sim.new_cluster(entry, hostname=str(body["hostname"]))).id
            ),
            answer=lambda cluster_id: JSONResponse({"id": cluster_id}, status_code=202),
        )

    def validate_create(body: dict[str, Any]) -> str | None:
        problem = required_strings_problem(body, REQUIRED_CREATE_FIELDS)
        if problem is not None:
            return problem
        if body["location_code"] not in LOCATION_CODES:
            return "Invalid location code"
        if body["cluster_type"] not in CLUSTER_TYPES:
            return "Invalid cluster type"
        if body["image"] not in CLUSTER_IMAGES_BY_KEY:
            if body["image"] in IMAGES_BY_KEY:
                return "Image is not a cluster image"
            return "Invalid image"
        refused = refusal(CLUSTER_IMAGES_BY_KEY[body["image"]], body["cluster_type"])
        if refused is not None:
            return refused
        contract = body.get("contract")
        if contract is not None and contract not in CONTRACTS:
            return "Invalid contract"
        if contract not in (None, "PAY_AS_YOU_GO"):
            return "The simulator sells pay-as-you-go clusters only"
        volume = body.get("shared_volume")
        if volume is not None:
            if not isinstance(volume, dict):
                return "shared_volume must be an object {name, size}"
            size, volume_name = volume.get("size"), volume.get("name")
            if size is not None and (isinstance(size, bool) or not isinstance(size, int)):
                return "shared_volume.size must be a positive integer (GB)"
            if size is not None and size < 1:
                return "shared_volume.size must be a positive integer (GB)"
            if volume_name is not None and (not isinstance(volume_name, str) or not volume_name):
                return "shared_volume.name must be a non-empty string"
        description = body.get("description")
        if description is not None and not isinstance(description, str):
            return "description must be a string"
        return keys_and_script_problem(sim, body)

    def make_cluster(body: dict[str, Any], cluster: SimVM) -> SimVM:
        keys = body.get("ssh_key_ids") or []
        volume = body.get("shared_volume") or {}
        size = volume.get("size")  # what the create sent: the SDK always sends one
        # The shared volume is a volume of its own type, billed apart from the cluster from
        # when it runs until the volume is deleted: discontinuing only detaches it (the document).
        shared = sim.new_volume(
            name=volume.get("name") or f"{cluster.name}-shared-volume",
            kind="NVMe_Shared_Cluster",
            size_gb=size or DEFAULT_SHARED_VOLUME_GB,
            location=cluster.entry.region,
            cluster_id=cluster.id,
            tags=tagged(body.get("tags") or []),
        )
        image = CLUSTER_IMAGES_BY_KEY[body["image"]]
        cluster.details.update(
            description=body.get("description") or "",
            image=image.image_type,
            os_name=image.details[0],
            startup_script_id=body.get("startup_script_id"),
            ssh_key_ids=[keys] if isinstance(keys, str) else list(keys),
            shared_volume_size=size,
            shared_volume_ids=[shared.id],
            tags=tagged(body.get("tags") or []),
        )
        return cluster

    async def list_clusters(request: Request) -> Response:
        wanted = request.query_params.get("status")

        def listed(cluster: SimVM) -> bool:  # without a filter: every one not discontinued
            status = sim.cluster_status(cluster)
            return status != "discontinued" if wanted is None else status == wanted

        return JSONResponse([cluster_json(sim, c) for c in sim.clusters.values() if listed(c)])

    async def get_cluster(request: Request) -> Response:
        cluster = sim.clusters.get(request.path_params["cluster_id"])
        if cluster is None:
            return error(404, "not_found", UNKNOWN_ID)
        return JSONResponse(cluster_json(sim, cluster))

    async def cluster_action(request: Request) -> Response:
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        actions = body.get("actions")
        if not isinstance(actions, list) or not actions:
            return invalid("actions should not be empty")
        for asked in actions:
            if not isinstance(asked, dict) or not isinstance(asked.get("id"), str):
                return invalid("each action needs a cluster id")
            if asked.get("action") != "discontinue":
                return invalid("Invalid action")
        # The document answers 202 with no body, and says nothing of partial failure: one
        # refusal refuses the whole request (a guess), in Verda's error body.
        for asked in actions:
            refusal = discontinue_problem(asked["id"])
            if refusal is not None:
                return error(*refusal)
        for asked in actions:
            sim.discontinue(sim.clusters[asked["id"]])
        await sim.faults.delay("delete_delay")
        return Response(status_code=202)

    def discontinue_problem(cluster_id: str) -> tuple[int, str, str] | None:
        """Why this cluster cannot be discontinued now (status, code, message), if it cannot:
        `forbidden_action` as Verda refuses an instance's delete (verda.md §6)."""
        cluster = sim.clusters.get(cluster_id)
        if cluster is None:
            return (404, "not_found", UNKNOWN_ID)
        status = sim.cluster_status(cluster)
        if status == "discontinued":
            return (403, "forbidden_action", "Can't discontinue a discontinued cluster")
        if sim.faults.take("delete_refused") is not None:
            return (403, "forbidden_action", "Can't discontinue a provisioning cluster")
        return None

    async def control_list(_request: Request) -> Response:
        sim.settle()  # each cluster's `charged` as of now
        return JSONResponse([sim.describe_cluster(c) for c in sim.clusters.values()])

    async def control_end(request: Request) -> Response:
        cluster = sim.clusters.get(request.path_params["cluster_id"])
        if cluster is None:
            return JSONResponse({"error": "no such cluster"}, status_code=404)
        sim.end_vm(cluster)
        sim.settle()
        return JSONResponse(sim.describe_cluster(cluster))

    async def control_end_node(request: Request) -> Response:
        cluster = sim.clusters.get(request.path_params["cluster_id"])
        nodes = [] if cluster is None else cluster.details["worker_nodes"]
        node = next((n for n in nodes if n["id"] == request.path_params["node_id"]), None)
        if cluster is None or node is None:
            return JSONResponse({"error": "no such cluster or node"}, status_code=404)
        node["lost"] = True  # the cluster runs on, and bills, with the nodes left
        return JSONResponse(cluster_json(sim, cluster))

    return [
        Route("/v1/cluster-types", cluster_types, methods=["GET"]),
        Route("/v1/cluster-availability", authed(sim, availability), methods=["GET"]),
        Route(
            "/v1/cluster-availability/{cluster_type}",
            authed(sim, availability_of_type),
            methods=["GET"],
        ),
        Route("/v1/images/cluster", authed(sim, images), methods=["GET"]),
        Route("/v1/clusters", authed(sim, list_clusters), methods=["GET"]),
        Route("/v1/clusters", authed(sim, create_cluster), methods=["POST"]),
        Route("/v1/clusters", authed(sim, cluster_action), methods=["PUT"]),
        Route("/v1/clusters/{cluster_id}", authed(sim, get_cluster), methods=["GET"]),
        Route("/_sim/clusters", control_list, methods=["GET"]),
        Route("/_sim/clusters/{cluster_id}/end", control_end, methods=["POST"]),
        Route(
            "/_sim/clusters/{cluster_id}/nodes/{node_id}/end", control_end_node, methods=["POST"]
        ),
    ]
