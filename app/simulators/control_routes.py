"""The `/_sim/...` control API of every simulator: stock, faults, settings, balance, logs."""

from dataclasses import asdict
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from app.core.text import check_text
from app.simulators.billing import BALANCE_PROBLEM, parse_amount
from app.simulators.core import ProviderSimulator
from app.simulators.faults import FAULT_KINDS
from app.simulators.network import Latency


def _problem(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _body(request: Request) -> dict[str, Any] | JSONResponse:
    try:
        body = await request.json()
    except ValueError:
        return _problem(422, "body must be JSON")
    if not isinstance(body, dict):
        return _problem(422, "body must be a JSON object")
    return body


def _number(body: dict[str, Any], key: str, default: float) -> float | None:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value)


def _refusal(body: dict[str, Any]) -> tuple[int, str | None, str] | JSONResponse:
    """A `create_refused` fault's status (a 4xx, 400 by default), reason (the provider's error
    code; null leaves it out of the envelope) and message, or the 422 saying what is wrong."""
    status, reason, message = body.get("status", 400), body.get("reason"), body.get("message")
    if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 499:
        return _problem(422, "status must be an integer from 400 to 499")
    if reason is not None and (not isinstance(reason, str) or not 1 <= len(reason) <= 64):
        return _problem(422, "reason must be null or a string of 1 to 64 characters")
    if not isinstance(message, str) or not 1 <= len(message) <= 1000:
        return _problem(422, "message must be a string of 1 to 1000 characters")
    for name, text in (("reason", reason), ("message", message)):
        try:
            check_text(text or "-")
        except ValueError as exc:
            return _problem(422, f"{name} {exc}")
    return status, reason, message


def control_routes(sim: ProviderSimulator) -> list[BaseRoute]:
    """The `/_sim/...` routes that tests, benchmarks and the demo drive a simulator through."""

    async def catalog(_request: Request) -> JSONResponse:
        kinds = [("instance", e) for e in sim.catalog.values()]
        kinds += [("cluster", e) for e in sim.cluster_catalog.values()]
        return JSONResponse(
            [
                {
                    "sku": e.sku,
                    "region": e.region,
                    "gpu_model": e.gpu_model,
                    "gpu_count": e.gpu_count,
                    "price_per_hour": str(e.price_per_hour),
                    "stock": sim.in_stock(e),
                    "kind": kind,
                    "nodes": e.nodes,
                    "gpus_per_node": e.gpus_per_node,
                }
                for kind, e in kinds
            ]
        )

    async def stock(request: Request) -> JSONResponse:
        body = await _body(request)
        if isinstance(body, JSONResponse):
            return body
        sku, region = body.get("sku"), body.get("region")
        quantity = body.get("quantity")
        if isinstance(quantity, bool) or not isinstance(quantity, int) or quantity < 0:
            return _problem(422, "quantity must be an integer >= 0")
        if sim.kind(str(sku), str(region)) is None:
            return _problem(404, f"no catalogue entry for sku {sku!r} in region {region!r}")
        changed_at = sim.set_stock(str(sku), str(region), quantity)
        return JSONResponse({"changed_at": changed_at})

    async def creates(_request: Request) -> JSONResponse:
        return JSONResponse([vars(c) for c in sim.creates])

    async def requests(_request: Request) -> JSONResponse:
        return JSONResponse([asdict(logged) for logged in sim.requests])

    async def vms(_request: Request) -> JSONResponse:
        sim.settle()  # each VM's `charged` as of now
        return JSONResponse([sim.describe_vm(vm) for vm in sim.vms.values()])

    async def volumes(_request: Request) -> JSONResponse:
        sim.settle()  # each volume's `charged` as of now
        return JSONResponse([v.describe() for v in sim.volumes.values()])

    async def end_vm(request: Request) -> JSONResponse:
        vm = sim.vms.get(request.path_params["vm_id"])
        if vm is None:
            return _problem(404, "no such VM")
        sim.end_vm(vm)
        sim.settle()
        return JSONResponse(sim.describe_vm(vm))

    async def faults(request: Request) -> JSONResponse:
        body = await _body(request)
        if isinstance(body, JSONResponse):
            return body
        kind = body.get("kind")
        if kind not in FAULT_KINDS:
            return _problem(422, f"kind must be one of {', '.join(FAULT_KINDS)}")
        count = body.get("count", 1)
        delays = ("timeout", "create_delay", "delete_delay")
        seconds = _number(body, "seconds", 5.0 if kind in delays else 0.0)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1 or seconds is None:
            return _problem(422, "count must be an integer >= 1 and seconds a number >= 0")
        if kind == "create_refused":
            refusal = _refusal(body)
            if isinstance(refusal, JSONResponse):
                return refusal
            status, reason, message = refusal
            sim.faults.add(kind, count, seconds, status, reason=reason, message=message)
            queued = {"kind": kind, "count": count, "seconds": seconds, "status": status}
            return JSONResponse({**queued, "reason": reason, "message": message}, 201)
        if "reason" in body or "message" in body:
            return _problem(422, "reason and message apply to create_refused faults only")
        status = body.get("status", 500)
        if kind != "http_500" and "status" in body:
            return _problem(422, "status applies to http_500 and create_refused faults only")
        if isinstance(status, bool) or not isinstance(status, int) or not 500 <= status <= 599:
            return _problem(422, "status must be an integer from 500 to 599")
        sim.faults.add(kind, count, seconds, status)
        body = {"kind": kind, "count": count, "seconds": seconds, "status": status}
        return JSONResponse(body, status_code=201)

    async def config(request: Request) -> JSONResponse:
        if request.method == "PUT":
            body = await _body(request)
            if isinstance(body, JSONResponse):
                return body
            if "boot_seconds" in body:
                boot = _number(body, "boot_seconds", 0)
                if boot is None:
                    return _problem(422, "boot_seconds must be a number >= 0")
                sim.boot_seconds = boot
            if "hour_seconds" in body:
                hour = _number(body, "hour_seconds", 3600.0)
                if hour is None or hour <= 0:
                    return _problem(422, "hour_seconds must be a number > 0")
                sim.hour_seconds = hour  # set it before machines run: it reprices their time
            if "latency_ms" in body or "jitter_ms" in body:
                latency = _number(body, "latency_ms", sim.answer_latency.ms)
                jitter = _number(body, "jitter_ms", sim.answer_latency.jitter_ms)
                if latency is None or jitter is None:
                    return _problem(422, "latency_ms and jitter_ms must be numbers >= 0")
                sim.answer_latency = Latency(latency, jitter)
            if "rate_limits" in body:
                if not isinstance(body["rate_limits"], bool):
                    return _problem(422, "rate_limits must be true or false")
                sim.rate_limits = body["rate_limits"]
                sim.limiter.clear()
            if "balance" in body:
                amount = parse_amount(body["balance"])
                if amount is None:
                    return _problem(422, BALANCE_PROBLEM)
                sim.balance = amount
            problem = sim.configure(body)
            if problem is not None:
                return _problem(422, problem)
        return JSONResponse(
            {
                "boot_seconds": sim.boot_seconds,
                "hour_seconds": sim.hour_seconds,
                "rate_limits": sim.rate_limits,
                "refused_by_rate_limits": sim.refused_by_limits,
                "latency_ms": sim.answer_latency.ms,
                "jitter_ms": sim.answer_latency.jitter_ms,
                "balance": str(sim.balance),
                **sim.config_view(),
            }
        )

    async def balance(request: Request) -> JSONResponse:
        if request.method == "PUT":
            body = await _body(request)
            if isinstance(body, JSONResponse):
                return body
            amount = parse_amount(body.get("balance"))
            if amount is None:
                return _problem(422, BALANCE_PROBLEM)
            sim.balance = amount
        return JSONResponse(
            {"balance": str(sim.balance), "hourly_charge": str(sim.hourly_charge())}
        )

    async def reset(_request: Request) -> JSONResponse:
        sim.reset()
        return JSONResponse({"reset": True})

    return [
        Route("/_sim/catalog", catalog, methods=["GET"]),
        Route("/_sim/stock", stock, methods=["PUT"]),
        Route("/_sim/creates", creates, methods=["GET"]),
        Route("/_sim/requests", requests, methods=["GET"]),
        Route("/_sim/volumes", volumes, methods=["GET"]),
        Route("/_sim/vms", vms, methods=["GET"]),
        Route("/_sim/vms/{vm_id}/end", end_vm, methods=["POST"]),
        Route("/_sim/faults", faults, methods=["POST"]),
        Route("/_sim/config", config, methods=["GET", "PUT"]),
        Route("/_sim/balance", balance, methods=["GET", "PUT"]),
        Route("/_sim/reset", reset, methods=["POST"]),
    ]
