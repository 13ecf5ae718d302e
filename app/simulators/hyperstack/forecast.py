"""`PUT /_sim/forecast`: what `GET /core/stocks` says Hyperstack plans to have of one GPU model in
one region (`planned_7_days`, `planned_30_days`, `planned_100_days`)."""

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from app.simulators.hyperstack.catalog import REGIONS
from app.simulators.hyperstack.simulator import PLANNED, HyperstackSimulator, json_object

MAX_PLANNED_LENGTH = 20  # room for any bucket ("200+") and for strings no client has seen


def forecast_routes(sim: HyperstackSimulator) -> list[BaseRoute]:
    """The control route that sets one model's forecast (no API key, as all of `/_sim`)."""

    async def forecast(request: Request) -> JSONResponse:
        body = await json_object(request)
        if body is None:
            return _problem(422, "body must be a JSON object")
        region, model = body.get("region"), body.get("gpu_model")
        if not isinstance(region, str) or region not in REGIONS:
            return _problem(404, f"no region {region!r}")
        if not isinstance(model, str) or model not in sim.stock_models(region):
            return _problem(404, f"no GPU model {model!r} in the stocks of {region}")
        planned = {key: body.get(key) for key in PLANNED}  # left out: null, no forecast
        for key, value in planned.items():
            if value is not None and not _planned_text(value):
                return _problem(
                    422, f"{key} must be null or a string of 1 to {MAX_PLANNED_LENGTH} characters"
                )
        sim.forecasts[(region, model)] = planned
        return JSONResponse({"region": region, "gpu_model": model, **planned})

    return [Route("/_sim/forecast", forecast, methods=["PUT"])]


def _planned_text(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_PLANNED_LENGTH


def _problem(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)
