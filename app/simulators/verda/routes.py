"""Verda's routes under `/v1`, served by `build_app` behind the shared fault and rate-limit gate."""

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from app.simulators.serving import provider_app
from app.simulators.verda.catalog import (
    ALL_TYPES,
    CPU_LOCATIONS,
    CPU_TYPES,
    LOCATIONS,
    VOLUME_TYPES,
)
from app.simulators.verda.clusters import cluster_routes
from app.simulators.verda.images import control_images
from app.simulators.verda.instances import instance_routes
from app.simulators.verda.keys import key_routes, script_routes
from app.simulators.verda.simulator import CLIENT_ID, CLIENT_SECRET, VerdaSimulator, error
from app.simulators.verda.volumes import volume_routes
from app.simulators.verda.wire import (
    authed,
    image_list,
    invalid,
    json_body,
    location_filter,
    not_found,
    spot_flag,
)


def build_app(sim: VerdaSimulator) -> Starlette:
    """Verda's API at its real paths (`/v1/...`) plus the `/_sim` control API."""

    async def token(request: Request) -> Response:
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        grant = body.get("grant_type")
        if grant == "client_credentials":
            if body.get("client_id") != CLIENT_ID or body.get("client_secret") != CLIENT_SECRET:
                return error(401, "unauthorized_request", "Invalid client id or client secret")
        elif grant == "refresh_token":
            refresh = body.get("refresh_token")
            if not isinstance(refresh, str) or refresh not in sim.refresh_tokens:
                return error(401, "unauthorized_request", "Invalid refresh token")
            sim.refresh_tokens.discard(refresh)
        else:
            return invalid("unsupported grant type")
        return JSONResponse(sim.issue_token(str(grant)))

    async def instance_types(request: Request) -> Response:
        currency = request.query_params.get("currency", "usd").lower()
        if currency not in ("usd", "eur"):
            return invalid("currency must be one of: usd, eur")
        if currency == "eur":
            return invalid("The simulator prices in usd only")
        return JSONResponse(list(ALL_TYPES.values()))

    async def volume_types(request: Request) -> Response:
        if request.query_params.get("currency", "usd").lower() != "usd":
            return invalid("The simulator prices in usd only")
        return JSONResponse(list(VOLUME_TYPES))

    def available_types(location: str, spot: bool) -> list[str]:
        if spot:
            return []  # the simulator keeps no spot stock
        names = [
            sku
            for (sku, region), n in sim.stock.items()
            if region == location and n > 0 and (sku, region) in sim.catalog  # no clusters
        ]
        if location in CPU_LOCATIONS:
            names += [t["instance_type"] for t in CPU_TYPES]
        return names

    async def availability(request: Request) -> Response:
        spot = spot_flag(request)
        if isinstance(spot, Response):
            return spot
        wanted = location_filter(request)
        return JSONResponse(
            [
                {"location_code": loc["code"], "availabilities": available_types(loc["code"], spot)}
                for loc in LOCATIONS
                if wanted is None or loc["code"] == wanted
            ]
        )

    async def availability_of_type(request: Request) -> Response:
        spot = spot_flag(request)
        if isinstance(spot, Response):
            return spot
        sku = request.path_params["instance_type"]
        wanted = location_filter(request)
        codes = [loc["code"] for loc in LOCATIONS if wanted is None or loc["code"] == wanted]
        return JSONResponse(any(sku in available_types(code, spot) for code in codes))

    async def locations(_request: Request) -> Response:
        return JSONResponse(list(LOCATIONS))

    async def images(request: Request) -> Response:
        return image_list(request, cluster=False)

    async def sim_images(_request: Request) -> Response:
        return JSONResponse(control_images())

    async def balance(_request: Request) -> Response:
        return JSONResponse({"amount": float(sim.balance), "currency": "usd"})

    routes: list[BaseRoute] = [
        Route("/v1/oauth2/token", token, methods=["POST"]),
        Route("/v1/instance-types", instance_types, methods=["GET"]),
        Route("/v1/volume-types", volume_types, methods=["GET"]),
        Route("/v1/instance-availability", authed(sim, availability), methods=["GET"]),
        Route(
            "/v1/instance-availability/{instance_type}",
            authed(sim, availability_of_type),
            methods=["GET"],
        ),
        Route("/v1/locations", authed(sim, locations), methods=["GET"]),
        Route("/v1/images", authed(sim, images), methods=["GET"]),
        Route("/_sim/images", sim_images, methods=["GET"]),
        *key_routes(sim),
        *script_routes(sim),
        *instance_routes(sim),
        *cluster_routes(sim),
        *volume_routes(sim),
        Route("/v1/balance", authed(sim, balance), methods=["GET"]),
    ]
    app = provider_app(sim, routes)
    app.add_exception_handler(404, not_found)
    app.add_exception_handler(405, not_found)
    return app
