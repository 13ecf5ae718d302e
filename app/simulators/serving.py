"""A simulator served: its provider routes and control API behind the gate that injects faults,
applies rate limits and logs every request."""

import asyncio
import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.simulators.control_routes import control_routes
from app.simulators.core import ProviderSimulator
from app.simulators.exchanges import CURRENT, Exchange, LoggedRequest, body_view, headers_of


class ProviderGate:
    """ASGI middleware in front of a provider's real API (not `/_sim`): faults, then rate limits."""

    def __init__(self, app: ASGIApp, sim: ProviderSimulator) -> None:
        self.app = app
        self.sim = sim

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _route_path(scope).startswith("/_sim"):
            await self.app(scope, receive, send)
            return
        # Read the body before any `timeout` delay: by the time the delay ends the client has
        # hung up, and a slow real API would still have done the work (made the VM).
        buffered: list[Message] = []
        while True:
            message = await receive()
            buffered.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break

        async def replay() -> Message:
            return buffered.pop(0) if buffered else await receive()

        receive = replay
        request = Request(scope, receive)
        raw_body = b"".join(m.get("body", b"") for m in buffered if m["type"] == "http.request")
        query = list(request.query_params.multi_items())
        logged = LoggedRequest(
            request.method, _route_path(scope), time.time(), query, body_view(raw_body)
        )
        self.sim.requests.append(logged)
        send = _noting_answer(send, logged)
        if self.sim.exchange_log is not None:
            exchange = Exchange(
                request.method, logged.path, query, headers_of(scope["headers"]), raw_body
            )
            self.sim.exchange_log.append(exchange)
            CURRENT.set(exchange)
            send = _keeping_answer(send, exchange)
        delay = self.sim.answer_latency.draw(self.sim.rng)
        if delay > 0:
            await asyncio.sleep(delay)
        response = await self.sim.faults.request_fault(request, self.sim)
        if response is None and self.sim.rate_limits:
            response = self.sim.rate_limit(request)
            self.sim.refused_by_limits += response is not None
        if response is not None:
            await response(scope, receive, send)
            return
        reported = self.sim.rate_limit_headers(request) if self.sim.rate_limits else {}
        if not reported:
            await self.app(scope, receive, send)
            return
        extra = [(k.lower().encode(), v.encode()) for k, v in reported.items()]

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)


def _noting_answer(send: Send, logged: LoggedRequest) -> Send:
    """`send` that notes the answer's status, and when its last byte left, on `logged`."""

    async def noting(message: Message) -> None:
        if message["type"] == "http.response.start":
            logged.status = message["status"]
        await send(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            logged.answered_at = time.time()

    return noting


def _keeping_answer(send: Send, exchange: Exchange) -> Send:
    """`send` that keeps the answer's status, content type and body on `exchange`."""

    async def keeping(message: Message) -> None:
        if message["type"] == "http.response.start":
            exchange.status = message["status"]
            for name, value in message.get("headers", []):
                if name.lower() == b"content-type":
                    exchange.answer_type = value.decode("latin-1")
        elif message["type"] == "http.response.body":
            exchange.answer += message.get("body", b"")
        await send(message)

    return keeping


def _route_path(scope: Scope) -> str:
    """The path below the mount point (Starlette keeps the full path and sets root_path)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


def provider_app(sim: ProviderSimulator, routes: list[BaseRoute]) -> Starlette:
    """A provider's simulated API: its real routes plus `/_sim`, behind the fault/limit gate."""
    app = Starlette(routes=[*routes, *control_routes(sim)])
    app.add_middleware(ProviderGate, sim=sim)
    app.state.simulator = sim
    return app
