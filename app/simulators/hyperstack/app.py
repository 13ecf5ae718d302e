"""Hyperstack's simulated HTTP API at its real paths under `/v1`, plus the `/_sim` control API."""

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from app.simulators.hyperstack.catalog import (
    GPUS,
    IMAGES,
    REGIONS,
    extra_flavors,
    flavor_fields,
)
from app.simulators.hyperstack.create import create_vms
from app.simulators.hyperstack.forecast import forecast_routes
from app.simulators.hyperstack.images import (
    control_images,
    flavor_restrictions,
    image_id,
    image_restrictions,
)
from app.simulators.hyperstack.simulator import (
    API_KEY,
    HyperstackSimulator,
    bad_request,
    error,
    fingerprint,
    json_object,
    not_found,
    ok,
)
from app.simulators.serving import provider_app

Handler = Callable[[Request], Awaitable[Response]]


# A delete is refused until creation has finished.
CREATING_STATUSES = ("CREATING", "BUILD")


async def no_route(_request: Request, exc: Exception) -> Response:
    """Unknown paths (404) and methods (405) in Hyperstack's error envelope, not plain text."""
    if isinstance(exc, HTTPException) and exc.status_code == 405:
        answer = error(405, "Method not allowed", "method_not_allowed")
        answer.headers.update(exc.headers or {})  # keeps `Allow`
        return answer
    return not_found("Resource not found")


async def _sim_images(_request: Request) -> Response:
    """Each image, its driver branch and the GPUs it runs (`images.control_images`)."""
    return JSONResponse(control_images())


def paged(request: Request, items: list[Any]) -> tuple[list[Any], int | None, int | None] | None:
    """`page` (from 1) and `pageSize` applied to a list; everything when `page` is absent."""
    raw_page, raw_size = request.query_params.get("page"), request.query_params.get("pageSize")
    if raw_page is None:
        return items, None, None
    try:
        page, size = int(raw_page), int(raw_size or 20)
    except ValueError:
        return None
    if page < 1 or size < 1:
        return None
    return items[(page - 1) * size : page * size], page, size


def text_filter(items: list[Any], search: str | None, key: Callable[[Any], str]) -> list[Any]:
    """Keep items whose name contains `search` (any case)."""
    if not search:
        return items
    return [item for item in items if search.casefold() in key(item).casefold()]


def build_app(sim: HyperstackSimulator) -> Starlette:
    """The simulated Infrahub API; mount it at `/hyperstack` so its base URL ends in `/v1`."""

    def authed(handler: Handler) -> Handler:
        async def checked(request: Request) -> Response:
            if request.headers.get("api_key") != API_KEY:
                return error(401, "Invalid or missing API key", "unauthorized")
            return await handler(request)

        return checked

    async def regions(_request: Request) -> Response:
        return ok(
            regions=[
                {"name": name, "description": f"{name} data centre", **r, "features": {}}
                for name, r in REGIONS.items()
            ]
        )

    async def gpus(_request: Request) -> Response:
        gpu_list = []
        for n, gpu in enumerate(GPUS.values(), start=1):
            where = sorted({e.region for e in sim.catalog.values() if e.details["gpu"] == gpu.name})
            gpu_list.append(
                {
                    "id": n,
                    "name": gpu.name,
                    "example_metadata": None,
                    "regions": [{"id": REGIONS[r]["id"], "name": r} for r in where],
                    "created_at": "2024-05-01T10:00:00+00:00",
                    "updated_at": "2026-01-15T09:00:00+00:00",
                }
            )
        return ok(gpu_list=gpu_list)

    async def flavors(request: Request) -> Response:
        wanted = request.query_params.get("region")
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for region in REGIONS:
            if wanted and wanted != region:
                continue
            rows = [
                flavor_fields(e, stock_available=sim.in_stock(e) > 0)
                | {"image_restrictions": image_restrictions(e)}
                for e in sim.catalog.values()
                if e.region == region
            ]
            for row in [*rows, *extra_flavors(region)]:
                groups.setdefault((row["gpu"], region), []).append(row)
        data = [
            {"gpu": gpu, "region_name": region, "flavors": rows}
            for (gpu, region), rows in groups.items()
        ]
        return ok(data=data)

    async def stocks(_request: Request) -> Response:
        return JSONResponse({"stocks": sim.stocks()})

    async def pricebook(_request: Request) -> Response:
        return JSONResponse(sim.pricebook())

    async def credit(_request: Request) -> Response:
        return ok(data=sim.credit())

    async def images(request: Request) -> Response:
        wanted = request.query_params.get("region")
        search = request.query_params.get("search")
        groups = []
        for region in REGIONS:
            if wanted and wanted != region:
                continue
            rows = [
                {
                    "id": image_id(region, local_id),
                    "name": name,
                    "region_name": region,
                    "type": kind,
                    "version": version,
                    "size": 8,
                    "display_size": "8 GB",
                    "description": name,
                    "is_public": True,
                    "labels": [],
                    "flavor_restrictions": flavor_restrictions(local_id, region),
                }
                for local_id, name, kind, version in IMAGES
            ]
            rows = text_filter(rows, search, lambda row: str(row["name"]))
            groups.append({"region_name": region, "type": "Ubuntu", "logo": "", "images": rows})
        return ok(images=groups)

    async def environments(request: Request) -> Response:
        if request.method == "POST":
            return await create_environment(request)
        items = text_filter(
            list(sim.environments.values()), request.query_params.get("search"), lambda e: e.name
        )
        page = paged(request, items)
        if page is None:
            return bad_request("page and pageSize must be positive integers")
        rows, number, size = page
        return ok(
            environments=[e.fields() for e in rows], page=number, page_size=size, count=len(items)
        )

    async def create_environment(request: Request) -> Response:
        body = await json_object(request)
        if body is None or not isinstance(body.get("name"), str) or not body["name"]:
            return bad_request("name and region are required")
        region = body.get("region")
        if region not in REGIONS:
            return bad_request(f"Region {region} is not a valid region")
        if body["name"] in sim.environments:
            return error(409, f"Environment {body['name']} already exists", "conflict")
        environment = sim.add_environment(body["name"], region)
        return ok("Environment created successfully", environment=environment.fields())

    async def keypairs(request: Request) -> Response:
        if request.method == "POST":
            return await import_keypair(request)
        items = text_filter(sim.keypairs, request.query_params.get("search"), lambda k: k.name)
        page = paged(request, items)
        if page is None:
            return bad_request("page and pageSize must be positive integers")
        rows, number, size = page
        return ok(
            keypairs=[k.fields() for k in rows], page=number, page_size=size, count=len(items)
        )

    async def import_keypair(request: Request) -> Response:
        body = await json_object(request)
        fields = ("name", "environment_name", "public_key")
        if body is None or not all(isinstance(body.get(f), str) and body[f] for f in fields):
            return bad_request("name, environment_name and public_key are required")
        environment = sim.environments.get(body["environment_name"])
        if environment is None:
            return not_found(f"Environment {body['environment_name']} not found")
        if fingerprint(body["public_key"]) is None:
            return bad_request("Invalid public key")
        if sim.keypair(body["name"], environment.name) is not None:
            return error(409, f"Keypair {body['name']} already exists", "conflict")
        keypair = sim.add_keypair(body["name"], environment, body["public_key"])
        return ok("Keypair imported successfully", keypair=keypair.fields())

    async def virtual_machines(request: Request) -> Response:
        if request.method == "POST":
            return await create_vms(sim, request)
        sim.purge_deleted()
        query = request.query_params
        vms = list(sim.vms.values())
        search = query.get("search")
        if search:
            vms = [
                v for v in vms if search.casefold() in (v.name or "").casefold() or v.id == search
            ]
        if query.get("environment"):
            exact = query.get("exact_environment_match", "false").lower() == "true"
            wanted = query["environment"]
            vms = [
                v
                for v in vms
                if (name := v.details["environment"].name) == wanted
                or (not exact and wanted.casefold() in name.casefold())
            ]
        page = paged(request, vms)
        if page is None:
            return bad_request("page and pageSize must be positive integers")
        rows, number, size = page
        instances = [sim.instance_fields(v) for v in rows]
        return ok(instances=instances, page=number, page_size=size, count=len(vms))

    async def virtual_machine(request: Request) -> Response:
        sim.purge_deleted()
        vm_id = request.path_params["vm_id"]
        vm = sim.vms.get(vm_id) if vm_id.isdigit() else None
        if vm is None:
            return not_found(f"Virtual machine with id {vm_id} not found")
        if request.method == "DELETE":
            refused = sim.faults.take("delete_refused") is not None
            if vm.deleted is None and (refused or sim.vm_status(vm) in CREATING_STATUSES):
                return bad_request(
                    f"Virtual machine {vm.id} is currently being created and cannot be deleted "
                    "yet. Please wait until the creation process is finished."
                )
            if vm.deleted is None:
                vm.deleted = sim.clock()
                await sim.faults.delay("delete_delay")
            return ok("Instance is being deleted.")
        return ok(instance=sim.instance_fields(vm))

    routes: list[BaseRoute] = [
        Route(path, authed(handler), methods=methods)
        for path, handler, methods in (
            ("/v1/core/regions", regions, ["GET"]),
            ("/v1/core/gpus", gpus, ["GET"]),
            ("/v1/core/flavors", flavors, ["GET"]),
            ("/v1/core/stocks", stocks, ["GET"]),
            ("/v1/pricebook", pricebook, ["GET"]),
            ("/v1/billing/user-credit/credit", credit, ["GET"]),
            ("/v1/core/images", images, ["GET"]),
            ("/v1/core/environments", environments, ["GET", "POST"]),
            ("/v1/core/keypairs", keypairs, ["GET", "POST"]),
            ("/v1/core/virtual-machines", virtual_machines, ["GET", "POST"]),
            ("/v1/core/virtual-machines/{vm_id}", virtual_machine, ["GET", "DELETE"]),
        )
    ]
    routes.append(Route("/_sim/images", _sim_images, methods=["GET"]))
    app = provider_app(sim, [*routes, *forecast_routes(sim)])
    app.add_exception_handler(404, no_route)
    app.add_exception_handler(405, no_route)
    return app
