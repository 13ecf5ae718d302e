"""The client's HTTP layer: a place retried once with the same Idempotency-Key, and every kind
of failure as one line with the exit code it means."""

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.client.api import ClientError, Exit, Target, exit_code_for, refusal, unreachable
from app.main import create_app
from app.settings import Settings
from tests.client.cli import Autoprovision, create_account
from tests.servers import serve_in_thread

B300 = ("-g", "b300", "-n", "8", "-p", "verda", "--max-price", "45")


class DropFirstAnswer:
    """In front of the service: the first order placed gets its answer's status line and
    headers, then the connection closes before the body, as when a network drops it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.places: list[tuple[str | None, int]] = []  # (Idempotency-Key, status the app gave)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope["method"], scope["path"]) != ("POST", "/v1/orders"):
            await self.app(scope, receive, send)
            return
        key = dict(scope["headers"]).get(b"idempotency-key", b"").decode() or None
        messages: list[Message] = []

        async def keep(message: Message) -> None:
            messages.append(message)

        await self.app(scope, receive, keep)
        self.places.append((key, messages[0]["status"]))
        if len(self.places) == 1:
            await send(messages[0])  # the start of the answer, and no body: the line drops
            return
        for message in messages:
            await send(message)


@pytest.fixture
def dropping(settings: Settings) -> Iterator[tuple[str, DropFirstAnswer]]:
    """The service behind `DropFirstAnswer`; its URL and the wrapper."""
    front = DropFirstAnswer(create_app(settings))
    with serve_in_thread(front, lifespan="on") as url:
        yield url, front


def test_a_place_whose_answer_is_lost_is_sent_again_with_its_key_and_placed_once(
    autoprovision: Autoprovision, dropping: tuple[str, DropFirstAnswer]
) -> None:
    url, front = dropping
    account = create_account(url)
    ran = autoprovision("orders", "place", *B300, "--url", url, "--key", account.key)
    assert ran.code == 0, ran.err
    (order,) = account.orders()
    assert ran.out.startswith(f"Placed: {order['id']}, 8x B300")  # not "already placed"
    (first_key, first_status), (second_key, second_status) = front.places
    assert first_status == 201  # the first try did place it (positive control)...
    assert first_key is not None and second_key == first_key  # ...and the retry had its key
    assert second_status == 201


def test_a_place_that_never_gets_an_answer_says_how_to_retry_safely(
    autoprovision: Autoprovision, nowhere: str
) -> None:
    ran = autoprovision(
        "orders", "place", *B300, "--url", nowhere, "--key", "k", "--idempotency-key", "run-9"
    )
    assert ran.code == 3
    assert "run the same command again with --idempotency-key run-9" in ran.err


def _failing_app() -> Starlette:
    async def overloaded(_request: Request) -> Response:
        body = {"error": {"code": "overloaded", "message": "the process is busy; nothing done"}}
        return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})

    async def html_502(_request: Request) -> Response:
        return PlainTextResponse("<html>Bad Gateway</html>", status_code=502)

    async def html_200(_request: Request) -> Response:
        return PlainTextResponse("<html>hello</html>")

    async def html_404(_request: Request) -> Response:
        return PlainTextResponse("Not Found", status_code=404)

    return Starlette(
        routes=[
            Route("/busy/v1/account", overloaded),
            Route("/proxy/v1/account", html_502),
            Route("/web/v1/account", html_200),
            Route("/other/v1/account", html_404),
        ]
    )


@pytest.fixture(scope="module")
def failing() -> Iterator[str]:
    """A server that answers as other things than the service do."""
    with serve_in_thread(_failing_app()) as url:
        yield url


@pytest.mark.parametrize(
    ("prefix", "code", "message"),
    [
        (
            "busy",
            3,
            "failed: the process is busy; nothing done (overloaded, HTTP 503); retry in 1 s",
        ),
        ("proxy", 3, "answered HTTP 502 (Bad Gateway) without the API's error"),
        ("web", 3, "answered HTTP 200 without JSON: is it the autoprovision service?"),
        ("other", 2, "answered HTTP 404 (Not Found) without the API's error"),
    ],
)
def test_answers_that_are_not_the_apis_are_one_line_with_their_code(
    autoprovision: Autoprovision, failing: str, prefix: str, code: int, message: str
) -> None:
    ran = autoprovision("account", "--url", f"{failing}/{prefix}", "--key", "ap_live_k")
    assert ran.code == code and message in ran.err and len(ran.err.splitlines()) == 1, ran.err


@pytest.mark.parametrize(
    ("status", "code"),
    [(400, 2), (401, 2), (403, 2), (404, 2), (409, 1), (413, 2), (422, 2), (429, 1),
     (500, 3), (502, 3), (503, 3), (302, 3)],
)  # fmt: skip
def test_exit_codes_by_status(status: int, code: int) -> None:
    assert exit_code_for(status) == code


def _response(status: int, body: Any) -> httpx.Response:
    return httpx.Response(status, json=body, request=httpx.Request("GET", "http://x/v1/account"))


def test_refusals_are_built_from_the_error_shape() -> None:
    target = Target("https://api.example.com", "ap_live_k")
    body = {"error": {"code": "order_not_waiting", "message": "order ord_1 is running;\n only"}}
    error = refusal(_response(409, body), target)
    assert (str(error), error.exit_code) == (
        "order ord_1 is running; only (order_not_waiting, HTTP 409)",
        Exit.REFUSED,
    )
    unknown = refusal(_response(401, {"error": {"code": "unauthorized", "message": "no"}}), target)
    assert str(unknown) == "no (unauthorized, HTTP 401); check --key or AUTOPROVISION_API_KEY"


def test_failures_to_connect_name_the_address_without_its_password() -> None:
    target = Target.resolve("https://ada:s3cret@api.example.com:8443/", "ap_live_k")
    assert target.url == "https://ada:s3cret@api.example.com:8443"
    timeout = unreachable(httpx.ReadTimeout("timed out"), target, retry_key=None)
    assert (
        str(timeout)
        == "cannot reach the service at https://api.example.com:8443: no answer in time"
    )
    broken = unreachable(httpx.RemoteProtocolError("peer closed"), target, retry_key=None)
    assert str(broken).endswith("the connection broke before the answer came")
    assert broken.exit_code == Exit.UNREACHABLE and "s3cret" not in str(broken)


def test_the_key_is_never_in_a_targets_repr() -> None:
    target = Target.resolve("http://127.0.0.1:8000", "ap_live_secret")
    assert "ap_live_secret" not in repr(target)
    with pytest.raises(ClientError, match="no API key"):
        Target.resolve("http://127.0.0.1:8000", None)


def test_the_environment_is_read_when_no_option_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOPROVISION_API_URL", "http://10.0.0.5:9000/")
    monkeypatch.setenv("AUTOPROVISION_API_KEY", " ap_live_from_env\n")
    assert Target.resolve(None, None) == Target("http://10.0.0.5:9000", "ap_live_from_env")
    monkeypatch.setenv("AUTOPROVISION_API_URL", "")  # empty means the default
    assert Target.resolve(None, "k").url == "http://127.0.0.1:8000"
