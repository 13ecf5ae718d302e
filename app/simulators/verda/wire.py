"""Verda's wire conventions shared by the simulated routes: errors, bodies, auth."""

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.simulators.verda.images import CLUSTER_IMAGES, IMAGES, images_of_type
from app.simulators.verda.simulator import VerdaSimulator, error
from app.simulators.vms import CatalogEntry

Handler = Callable[[Request], Awaitable[Response]]


def invalid(message: str) -> Response:
    """400 `invalid_request`."""
    return error(400, "invalid_request", message)


def unauthorized() -> Response:
    """401 `unauthorized_request` for a missing, unknown or expired bearer token."""
    return error(401, "unauthorized_request", "Invalid or expired access token")


def no_capacity() -> Response:
    """Verda's capacity error on `POST /v1/instances` (and `POST /v1/clusters`)."""
    return error(503, "service_unavailable", "No capacity available")


async def json_body(request: Request) -> dict[str, Any] | Response:
    """The request's JSON object, or Verda's 400."""
    try:
        body = json.loads(await request.body() or b"null")
    except ValueError:
        return invalid("Request body is not valid JSON")
    return body if isinstance(body, dict) else invalid("Request body must be a JSON object")


def required_strings_problem(body: dict[str, Any], fields: tuple[str, ...]) -> str | None:
    """Verda's answer to a create body missing one of `fields` (or sending it empty)."""
    for field in fields:
        value = body.get(field)
        if not isinstance(value, str) or not value.strip():
            return f"{field} should not be empty"
    return None


async def create(
    sim: VerdaSimulator,
    body: dict[str, Any],
    *,
    kind: str,
    sku_field: str,
    problem: Callable[[dict[str, Any]], str | None],
    catalog: dict[tuple[str, str], CatalogEntry],
    make: Callable[[CatalogEntry], str],
    answer: Callable[[str], Response],
    unsellable: bool = False,
) -> Response:
    """A create as Verda answers it, for instances and clusters alike: the body checked, the
    account's funds, a unit of stock taken, the thing made (`make` returns its id), each
    outcome logged in `/_sim/creates`; the create fault kinds apply (`create_refused` first,
    whatever the body). `unsellable` is a body
    the catalogue cannot serve even when the kind is stocked (a spot instance)."""
    sku, region, hostname = (body.get(k) for k in (sku_field, "location_code", "hostname"))
    # The script's text as it is at the create (a later delete of the script changes nothing).
    script = sim.startup_scripts.get(str(body.get("startup_script_id")), {}).get("script")
    image = body.get("image")

    def record(outcome: str, made: str | None = None) -> None:
        sim.record_create(
            sku=sku if isinstance(sku, str) else None,
            region=region if isinstance(region, str) else None,
            name=hostname if isinstance(hostname, str) else None,
            outcome=outcome,
            vm_id=made,
            kind=kind,
            startup_script=script,
            image=image if isinstance(image, str) else None,
        )

    refused = sim.refused_create(
        sku=sku if isinstance(sku, str) else None,
        region=region if isinstance(region, str) else None,
        name=hostname if isinstance(hostname, str) else None,
        kind=kind,
    )
    if refused is not None:
        return refused
    said = problem(body)
    if said is not None:
        record("rejected")
        return invalid(said)
    entry = catalog.get((str(sku), str(region)))
    if entry is None or unsellable:
        record("no_capacity")
        return no_capacity()
    if sim.balance < entry.price_per_hour:
        record("insufficient_funds")
        return error(402, "insufficient_funds", "Not enough funds to perform this action")
    if sim.in_stock(entry) > 0 and sim.faults.take("capacity_race") is not None:
        record("capacity_race")
        return no_capacity()
    if not sim.take_one(entry):
        record("no_capacity")
        return no_capacity()
    made = make(entry)
    if sim.faults.take("create_error_after_commit") is not None:
        record("error_after_commit", made)
        return sim.server_error_response()
    record("created", made)
    await sim.faults.delay("create_delay")
    return answer(made)


def keys_and_script_problem(sim: VerdaSimulator, body: dict[str, Any]) -> str | None:
    """What is wrong with a create's `ssh_key_ids` (one id or a list) and `startup_script_id`
    (null when unused: the SDK always sends it), if anything: both must name known ones."""
    keys = body.get("ssh_key_ids") or []
    keys = [keys] if isinstance(keys, str) else keys
    if not isinstance(keys, list) or any(k not in sim.ssh_keys for k in keys):
        return "Invalid ssh key id"
    script_id = body.get("startup_script_id")
    if script_id is not None and (
        not isinstance(script_id, str) or script_id not in sim.startup_scripts
    ):
        return "Invalid startup script id"
    return None


def image_list(request: Request, *, cluster: bool) -> Response:
    """`GET /v1/images` (or `/v1/images/cluster`): every image, or with `?instance_type=` those
    that boot that type; a type Verda does not know is its 404."""
    instance_type = request.query_params.get("instance_type")
    if instance_type is None:
        return JSONResponse(list(CLUSTER_IMAGES if cluster else IMAGES))
    fitting = images_of_type(instance_type, cluster=cluster)
    if fitting is None:
        return error(404, "not_found", "Instance type not found")
    return JSONResponse(fitting)


def location_filter(request: Request) -> str | None:
    """The `location_code` (or deprecated `locationCode`) a stock read asks about, if any."""
    params = request.query_params
    return params.get("location_code", params.get("locationCode"))


def spot_flag(request: Request) -> bool | Response:
    """`is_spot` (or the deprecated `isSpot`) as a boolean; "false" when absent."""
    raw = request.query_params.get("is_spot", request.query_params.get("isSpot", "false"))
    if raw.lower() not in ("true", "false"):
        return invalid("is_spot must be a boolean string")
    return raw.lower() == "true"


def authed(sim: VerdaSimulator, handler: Handler) -> Handler:
    """`handler`, behind Verda's bearer-token check."""

    async def wrapped(request: Request) -> Response:
        if not sim.authorized(request):
            return unauthorized()
        return await handler(request)

    return wrapped


async def not_found(_request: Request, _exc: Exception) -> Response:
    """Verda answers unknown paths (and methods) with its JSON 404."""
    return error(404, "not_found", "Resource not found")
