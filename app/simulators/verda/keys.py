"""SSH keys and startup scripts: what a create names by id, at both of Verda's key paths.

Shapes follow the official SDK (`verda/ssh_keys`, `verda/startup_scripts`): POST answers 201
with the bare id as text, GET by id answers a list of one, DELETE takes `{"keys": [...]}` /
`{"scripts": [...]}` or one id in the path.
"""

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from app.simulators.verda.simulator import VerdaSimulator, error
from app.simulators.verda.wire import Handler, authed, invalid, json_body

SCRIPT_LIMIT = 100  # startup scripts per project (Verda's default quota)
SCRIPT_PAGE_MAX = 100  # `GET /v1/scripts`'s largest page


def _deleter(store: Callable[[], dict[str, dict[str, Any]]], field: str, missing: str) -> Handler:
    """DELETE of the ids in the body's `field` list, or of the one id in the path.

    All or nothing: one unknown id is a 404 and nothing is deleted.
    """

    async def delete(request: Request) -> Response:
        if "item_id" in request.path_params:
            ids: Any = [request.path_params["item_id"]]
        else:
            body = await json_body(request)
            if isinstance(body, Response):
                return body
            ids = body.get(field)
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            return invalid(f"{field} should be a non-empty list of ids")
        records = store()  # looked up per call: a reset replaces the dict
        if any(i not in records for i in ids):
            return error(404, "not_found", missing)
        for item_id in ids:
            records.pop(item_id, None)
        return Response(status_code=200)

    return delete


def key_routes(sim: VerdaSimulator) -> list[BaseRoute]:
    """`/v1/ssh-keys` and its deprecated alias `/v1/sshkeys` (the one the SDK uses)."""

    async def ssh_keys(request: Request) -> Response:
        if request.method == "GET":
            return JSONResponse(list(sim.ssh_keys.values()))
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        name, key = body.get("name"), body.get("key")
        if not isinstance(name, str) or not name.strip():
            return invalid("name should not be empty")
        if not isinstance(key, str) or not key.strip().startswith(("ssh-", "ecdsa-")):
            return invalid("key must be a valid public SSH key")
        return PlainTextResponse(sim.add_ssh_key(name.strip(), key.strip())["id"], 201)

    async def ssh_key(request: Request) -> Response:
        record = sim.ssh_keys.get(request.path_params["item_id"])
        if record is None:
            return error(404, "not_found", "SSH key not found")
        return JSONResponse([record])  # a list of one, as the Python SDK reads it

    delete = authed(sim, _deleter(lambda: sim.ssh_keys, "keys", "SSH key not found"))
    routes: list[BaseRoute] = []
    for base in ("/v1/ssh-keys", "/v1/sshkeys"):
        routes += [
            Route(base, authed(sim, ssh_keys), methods=["GET", "POST"]),
            Route(base, delete, methods=["DELETE"]),
            Route(f"{base}/{{item_id}}", authed(sim, ssh_key), methods=["GET"]),
            Route(f"{base}/{{item_id}}", delete, methods=["DELETE"]),
        ]
    return routes


def script_routes(sim: VerdaSimulator) -> list[BaseRoute]:
    """`/v1/scripts`: startup scripts a create refers to by `startup_script_id`."""

    def listed_scripts(request: Request) -> Response:
        """One page, as the document says: `page` from 1, `pageSize` 10 by default and 100 at
        most, newest first unless `orderDirection=asc`, `name` a partial match."""
        params = request.query_params
        try:
            page, size = int(params.get("page", "1")), int(params.get("pageSize", "10"))
        except ValueError:
            return invalid("page and pageSize must be numbers")
        if page < 1 or not 1 <= size <= SCRIPT_PAGE_MAX:
            return invalid(f"page starts at 1; pageSize is 1 to {SCRIPT_PAGE_MAX}")
        wanted = params.get("name")
        found = [s for s in sim.startup_scripts.values() if wanted is None or wanted in s["name"]]
        newest_first = params.get("orderDirection", "desc") != "asc"
        if newest_first:  # kept in the order they were made
            found.reverse()
        return JSONResponse(found[(page - 1) * size : page * size])

    async def scripts(request: Request) -> Response:
        if request.method == "GET":
            return listed_scripts(request)
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        name, script = body.get("name"), body.get("script")
        if not isinstance(name, str) or not name.strip():
            return invalid("name should not be empty")
        if not isinstance(script, str) or not script.strip():
            return invalid("script should not be empty")
        if len(sim.startup_scripts) >= SCRIPT_LIMIT:
            return invalid(f"Startup script limit exceeded ({SCRIPT_LIMIT} per project)")
        return PlainTextResponse(sim.add_startup_script(name.strip(), script)["id"], 201)

    async def script(request: Request) -> Response:
        record = sim.startup_scripts.get(request.path_params["item_id"])
        if record is None:
            return error(404, "not_found", "Startup script not found")
        return JSONResponse([record])  # a list of one, as the Python SDK reads it

    async def control(request: Request) -> Response:
        """`/_sim/startup-scripts`: every script kept, or one more (`{name, script}`)."""
        if request.method == "GET":
            return JSONResponse(list(sim.startup_scripts.values()))
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        name, script = body.get("name"), body.get("script")
        if not isinstance(name, str) or not isinstance(script, str):
            return JSONResponse({"error": "name and script must be strings"}, 422)
        return JSONResponse(sim.add_startup_script(name, script), 201)

    missing = "Startup script not found"
    delete = authed(sim, _deleter(lambda: sim.startup_scripts, "scripts", missing))
    return [
        Route("/_sim/startup-scripts", control, methods=["GET", "POST"]),
        Route("/v1/scripts", authed(sim, scripts), methods=["GET", "POST"]),
        Route("/v1/scripts", delete, methods=["DELETE"]),
        Route("/v1/scripts/{item_id}", authed(sim, script), methods=["GET"]),
        Route("/v1/scripts/{item_id}", delete, methods=["DELETE"]),
    ]
