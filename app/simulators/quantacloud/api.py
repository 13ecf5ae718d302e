"""QuantaCloud's HTTP API as the simulator serves it, under `/api/v1` (see the reference notes)."""

import hmac
import math
from collections.abc import Awaitable, Callable, Sequence
from decimal import Decimal
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from app.providers.quantacloud import facts
from app.simulators.quantacloud.catalog import (
    FAMILY_LABELS,
    KINDS,
    kind_of,
    offer_json,
    per_gpu_price,
)
from app.simulators.quantacloud.simulator import (
    API_KEY,
    QuantaCloudSimulator,
    SSHKey,
    error,
    fingerprint,
)
from app.simulators.serving import provider_app

METHOD_NOT_ALLOWED = facts.ErrorCode("method_not_allowed", 405)  # a guess: no source shows one
DEFAULT_PAGE_SIZE = 20  # a guess: no source gives it, and the adapter always sends `size`
T = TypeVar("T")
Handler = Callable[[Request], Awaitable[Response]]


def _authorized(request: Request) -> bool:
    """`X-API-Key: <key>` or `Authorization: Bearer <key>` (the docs bless both)."""
    given = request.headers.get(facts.API_KEY_HEADER)
    if given is None and facts.BEARER_ACCEPTED:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        given = token.strip() if scheme.lower() == "bearer" else None
    return given is not None and hmac.compare_digest(given.encode(), API_KEY.encode())


def _unauthorized() -> JSONResponse:
    return error(facts.UNAUTHORIZED, "Invalid or missing API key.")


def _paging(request: Request) -> tuple[int, int] | JSONResponse:
    """`page` (0-indexed) and `size` (at most 100) from the query string."""
    try:
        page = int(request.query_params.get(facts.PAGE, "0"))
        size = int(request.query_params.get(facts.SIZE, str(DEFAULT_PAGE_SIZE)))
    except ValueError:
        return error(facts.VALIDATION_ERROR, "page and size must be integers.")
    if page < 0 or size < 1:
        return error(facts.VALIDATION_ERROR, "page must be >= 0 and size >= 1.")
    return page, min(size, facts.MAX_PAGE_SIZE)


def _page(rows: Sequence[T], page: int, size: int) -> tuple[list[T], dict[str, Any]]:
    """One page of rows and the envelope fields that describe it."""
    chunk = list(rows[page * size : (page + 1) * size])
    total_pages = math.ceil(len(rows) / size)
    return chunk, {
        "page": page,
        "totalPages": total_pages,
        "totalElements": len(rows),
        facts.HAS_MORE: page + 1 < total_pages,
    }


async def _json_object(request: Request) -> dict[str, Any] | None:
    try:
        body = await request.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _routes(sim: QuantaCloudSimulator) -> list[BaseRoute]:
    def keyed(handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            return await handler(request) if _authorized(request) else _unauthorized()

        return guarded

    async def offers(request: Request) -> Response:
        paging = _paging(request)
        if isinstance(paging, JSONResponse):
            return paging
        rows, envelope = _page(sim.live_offers(), *paging)
        return JSONResponse(
            {facts.OFFER_ROWS: [offer_json(e, offer_id) for e, offer_id in rows], **envelope}
        )

    async def offer(request: Request) -> Response:
        offer_id = request.path_params["offer_id"]
        entry = sim.offer_by_id(offer_id)
        if entry is None:
            return error(facts.NOT_FOUND, "Offer not found")
        return JSONResponse(offer_json(entry, offer_id))

    async def gpu_families(_request: Request) -> Response:
        families = []
        for key, label in FAMILY_LABELS.items():
            entries = [e for e in sim.catalog.values() if kind_of(e).family == key]
            stocked = [e for e in entries if sim.in_stock(e) > 0]
            cheapest = min((per_gpu_price(e) for e in stocked), default=None)
            families.append(
                {
                    "key": key,
                    "label": label,
                    "cheapestPrice": None if cheapest is None else float(round(cheapest, 4)),
                    "offerCount": len(entries),
                    "availableCount": sum(sim.in_stock(e) for e in stocked),
                    "variantSlugs": [k.slug for k in KINDS if k.family == key],
                }
            )
        return JSONResponse({"data": families})

    async def account(_request: Request) -> Response:
        return JSONResponse(
            {
                "id": "usr_sim0001",
                "email": "sim@quantacloud.example",
                "name": "Simulated Account",
                "createdAt": "2026-01-15T09:30:00.000Z",
            }
        )

    async def balance(_request: Request) -> Response:
        # Unverified: the reference never saw this body; this is its proposal.
        return JSONResponse({facts.BALANCE_KEYS[0]: sim.balance_text(), "currency": facts.CURRENCY})

    async def list_ssh_keys(_request: Request) -> Response:
        return JSONResponse([key.to_json() for key in sim.ssh_keys.values()])

    async def add_ssh_key(request: Request) -> Response:
        body = await _json_object(request)
        if body is None:
            return error(facts.VALIDATION_ERROR, "Body must be a JSON object.")
        name, public_key = body.get(facts.KEY_NAME), body.get(facts.KEY_PUBLIC)
        if not isinstance(name, str) or not name.strip():
            return error(facts.VALIDATION_ERROR, "name is required.")
        fp = fingerprint(public_key) if isinstance(public_key, str) else None
        if fp is None:
            return error(facts.VALIDATION_ERROR, "publicKey is not an OpenSSH public key.")
        key: SSHKey = sim.add_ssh_key(name.strip(), fp)
        return JSONResponse(key.to_json(), status_code=201)

    async def create_deployment(request: Request) -> Response:
        body = await _json_object(request)
        offer_id = body.get(facts.OFFER_ID) if body else None
        key_ids = body.get(facts.SSH_KEY_IDS) if body else None
        entry = sim.offer_by_id(offer_id) if isinstance(offer_id, str) else None
        sku, region = (entry.sku, entry.region) if entry else (None, None)

        def refuse(outcome: str, response: Response) -> Response:
            sim.record_create(sku=sku, region=region, name=None, outcome=outcome)
            return response

        if (refused := sim.refused_create(sku=sku, region=region, name=None)) is not None:
            return refused
        if body is None or not isinstance(offer_id, str) or not offer_id:
            return refuse("rejected", error(facts.VALIDATION_ERROR, "offer_id is required."))
        provider = body.get(facts.PROVIDER_FIELD)
        if provider != facts.PROVIDER_SLUG:
            return refuse(
                "rejected", error(facts.PROVIDER_NOT_FOUND, f"Provider {provider!r} not found.")
            )
        if key_ids is None or key_ids == []:
            key_ids = list(sim.ssh_keys)  # omitted or empty: every key on the account (facts)
        elif not isinstance(key_ids, list) or not all(
            isinstance(k, str) and k in sim.ssh_keys for k in key_ids
        ):
            return refuse("rejected", error(facts.VALIDATION_ERROR, "Unknown ssh_key_ids."))
        if entry is None:
            gone = sim.offer_keys.get(offer_id)
            if gone is not None and sim.in_stock(sim.catalog[gone]) <= 0:
                sim.start_cooldown(gone)
                sku, region = gone
            return refuse("no_capacity", _offer_unavailable())
        cooling = sim.cooling_for(entry.key)
        if cooling is not None:
            return refuse(
                "no_capacity",
                error(
                    facts.OFFER_COOLING_DOWN,
                    "A recent deployment attempt hit capacity for this offer; retry later.",
                    **{facts.RETRY_AFTER: math.ceil(cooling)},
                ),
            )
        if sim.faults.take("capacity_race") is not None:
            sim.start_cooldown(entry.key)
            return refuse("capacity_race", _offer_unavailable())
        if sim.balance < entry.price_per_hour:
            return refuse(
                "insufficient_funds",
                error(
                    facts.INSUFFICIENT_BALANCE,
                    f"Insufficient balance. Required: ${_dollars(entry.price_per_hour)}, "
                    f"available: ${_dollars(sim.balance)}",
                    required_balance=str(entry.price_per_hour),
                    current_balance=sim.balance_text(),
                ),
            )
        vm = sim.new_deployment(entry, offer_id, [str(k) for k in key_ids])
        if sim.faults.take("create_error_after_commit") is not None:
            sim.record_create(
                sku=sku, region=region, name=None, outcome="error_after_commit", vm_id=vm.id
            )
            return sim.server_error_response()
        sim.record_create(sku=sku, region=region, name=None, outcome="created", vm_id=vm.id)
        await sim.faults.delay("create_delay")
        answer = {"id": vm.id, "status": sim.status_for_response(vm)}
        return JSONResponse(answer, status_code=facts.CREATED_STATUS)

    async def list_deployments(request: Request) -> Response:
        paging = _paging(request)
        if isinstance(paging, JSONResponse):
            return paging
        newest_first = sorted(sim.vms.values(), key=lambda vm: vm.created_at, reverse=True)
        rows, envelope = _page(newest_first, *paging)
        data = [sim.deployment_json(vm) for vm in rows]
        return JSONResponse({facts.DEPLOYMENT_ROWS: data, **envelope})

    async def get_deployment(request: Request) -> Response:
        vm = sim.vms.get(request.path_params["deployment_id"])
        if vm is None:
            return error(facts.NOT_FOUND, "Deployment not found")
        return JSONResponse(sim.deployment_json(vm))

    async def stop_deployment(request: Request) -> Response:
        vm = sim.vms.get(request.path_params["deployment_id"])
        if vm is None:
            return error(facts.NOT_FOUND, "Deployment not found")
        status = sim.vm_status(vm)
        if status in (facts.STOPPING, facts.TERMINATED, facts.FAILED, facts.INTERRUPTED):
            return error(facts.VALIDATION_ERROR, f"Deployment is {status} and cannot stop.")
        if sim.faults.take("delete_refused") is not None:
            return error(facts.VALIDATION_ERROR, f"Deployment is {status} and cannot stop yet.")
        vm.deleted = sim.clock()
        answer = {"id": vm.id, "status": sim.status_for_response(vm)}
        await sim.faults.delay("delete_delay")
        return JSONResponse(answer, status_code=facts.STOP_STATUS)

    base = facts.API_PATH
    return [
        Route(base + facts.OFFERS, offers, methods=["GET"]),
        Route(base + facts.OFFER, offer, methods=["GET"]),
        Route(base + facts.GPU_FAMILIES, gpu_families, methods=["GET"]),
        Route(base + facts.ACCOUNT, keyed(account), methods=["GET"]),
        Route(base + facts.BALANCE, keyed(balance), methods=["GET"]),
        Route(base + facts.SSH_KEYS, keyed(list_ssh_keys), methods=["GET"]),
        Route(base + facts.SSH_KEYS, keyed(add_ssh_key), methods=["POST"]),
        Route(base + facts.DEPLOYMENTS, keyed(create_deployment), methods=["POST"]),
        Route(base + facts.DEPLOYMENTS, keyed(list_deployments), methods=["GET"]),
        Route(base + facts.DEPLOYMENT, keyed(get_deployment), methods=["GET"]),
        Route(base + facts.STOP, keyed(stop_deployment), methods=["POST"]),
    ]


def _offer_unavailable() -> JSONResponse:
    return error(facts.OFFER_UNAVAILABLE, "Offer is no longer available.")


def _dollars(amount: Decimal) -> str:
    """An amount the way the 402 message prints it (`$0.79`, `$0`)."""
    return format(amount.normalize(), "f")


async def _no_route(_request: Request, exc: Exception) -> Response:
    """Unknown paths (404) and methods (405) in QuantaCloud's error envelope, not plain text."""
    if isinstance(exc, HTTPException) and exc.status_code == 405:
        answer = error(METHOD_NOT_ALLOWED, "Method not allowed.")
        answer.headers.update(exc.headers or {})  # keeps `Allow`
        return answer
    return error(facts.NOT_FOUND, "Resource not found.")


def build_app(sim: QuantaCloudSimulator) -> Starlette:
    """The simulated QuantaCloud API plus its `/_sim` control API."""
    app = provider_app(sim, _routes(sim))
    app.add_exception_handler(404, _no_route)
    app.add_exception_handler(405, _no_route)
    return app
