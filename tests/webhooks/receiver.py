"""A webhook receiver on a real socket, as a customer would run one."""

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.servers import serve_in_thread


@dataclass(frozen=True)
class Answer:
    """How the receiver answers one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    body: str = "ok"


@dataclass(frozen=True)
class Received:
    """One request as it arrived."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.time() on arrival

    def verify(self, secret: str) -> Any:
        """The payload, if `Webhook(secret).verify` accepts the request (else raises)."""
        return Webhook(secret).verify(self.body, self.headers)

    def verifies(self, secret: str) -> bool:
        """Whether the request is signed with `secret`."""
        try:
            self.verify(secret)
        except (WebhookVerificationError, ValueError):
            return False
        return True


class Receiver:
    """Records every request and answers from a queue of planned answers (then 200)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.received: list[Received] = []
        self.planned: dict[str, deque[Answer]] = {}
        self.default: dict[str, Answer] = {}
        self.checks: dict[str, Callable[[Received], Answer | None]] = {}
        self.url = ""
        self.app = Starlette(routes=[Route("/{path:path}", self.handle, methods=["POST"])])

    def plan(self, path: str, *answers: Answer) -> None:
        """Answer the next requests to `path` with these, in order."""
        with self.lock:
            self.planned.setdefault(path, deque()).extend(answers)

    def always(self, path: str, answer: Answer) -> None:
        """Answer requests to `path` like this once the planned answers are used up."""
        with self.lock:
            self.default[path] = answer

    def check(self, path: str, refusal: Callable[[Received], Answer | None]) -> None:
        """Answer requests to `path` with `refusal(request)` where it gives an answer (as an app
        refuses a body it does not take), before any planned answer."""
        with self.lock:
            self.checks[path] = refusal

    def on(self, path: str) -> list[Received]:
        """The requests that arrived at `path` so far."""
        with self.lock:
            return [r for r in self.received if r.path == path]

    async def handle(self, request: Request) -> Response:
        path = request.url.path
        body = await request.body()
        received = Received(path, dict(request.headers), body, time.time())
        with self.lock:
            self.received.append(received)
            check = self.checks.get(path)
            answer = check(received) if check is not None else None
            if answer is None:
                queue = self.planned.get(path)
                answer = queue.popleft() if queue else self.default.get(path, Answer())
        if answer.delay:
            await asyncio.sleep(answer.delay)
        return Response(answer.body, status_code=answer.status, headers=answer.headers)


@contextmanager
def running_receiver() -> Iterator[Receiver]:
    """A Receiver served on 127.0.0.1 until the block ends."""
    receiver = Receiver()
    with serve_in_thread(receiver.app) as url:
        receiver.url = url
        yield receiver
