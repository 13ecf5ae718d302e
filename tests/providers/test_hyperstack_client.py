"""Hyperstack's envelope carries `status`: a 2xx whose body says `status: false` is not a
success, and each call reads it as what it can mean (hyperstack.md §1)."""

from collections.abc import AsyncIterator, Awaitable, Callable
from decimal import Decimal
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.providers.base import OutcomeUnknown, ProviderError, Unavailable
from app.providers.hyperstack.client import HyperstackClient

SAID_NO = {"status": False, "message": "Something went wrong on our side"}
INSTANCE = {"id": 412001, "name": "ap-x-1", "status": "CREATING", "labels": ["ap-order-x"]}
# What each call answers when it does succeed (`status: true`), for the controls.
SUCCESS: dict[tuple[str, str], Any] = {
    ("GET", "/v1/core/flavors"): {"data": []},
    ("GET", "/v1/core/stocks"): {"stocks": []},
    ("GET", "/v1/core/virtual-machines/412001"): {"instance": INSTANCE},
    ("GET", "/v1/core/virtual-machines"): {"instances": [INSTANCE]},
    ("GET", "/v1/billing/user-credit/credit"): {"data": {"credit": 10.0}},
    ("GET", "/v1/core/environments"): {"environments": []},
    ("POST", "/v1/core/virtual-machines"): {"instances": [INSTANCE]},
    ("DELETE", "/v1/core/virtual-machines/412001"): {},
    ("POST", "/v1/core/environments"): {"environment": {"name": "ap-canada-1"}},
    ("POST", "/v1/core/keypairs"): {"keypair": {"name": "ap-key"}},
}
Call = Callable[[HyperstackClient], Awaitable[Any]]
READS: dict[str, Call] = {
    "flavors": lambda c: c.flavors(),
    "stocks": lambda c: c.stocks(),
    "vm": lambda c: c.vm("412001"),
    "vms": lambda c: c.vms(page=1, page_size=100),
    "credit": lambda c: c.credit(),
    "environments": lambda c: c.environments("ap-canada-1"),
}
BEFORE_THE_CREATE: dict[str, Call] = {
    "create_environment": lambda c: c.create_environment("ap-canada-1", "CANADA-1"),
    "import_keypair": lambda c: c.import_keypair("ap-key", "ap-canada-1", "ssh-ed25519 AAAA"),
}


def create(client: HyperstackClient) -> Awaitable[Any]:
    payload = {"name": "ap-x-1", "flavor_name": "n3-H100x1", "labels": ["ap-order-x"]}
    return client.create_vm(payload, region="CANADA-1", price_per_hour=Decimal("2.40"))


@pytest.fixture(params=[False, True], ids=["status false", "status true"])
def says(request: pytest.FixtureRequest) -> bool:
    """What every 200 says in its `status`: false (what is tested), true (the control)."""
    return bool(request.param)


@pytest.fixture
async def client(says: bool) -> AsyncIterator[HyperstackClient]:
    def serve(request: httpx.Request) -> httpx.Response:
        body = SUCCESS[(request.method, request.url.path)]
        return httpx.Response(200, json={**body, "status": True} if says else SAID_NO)

    async with httpx.AsyncClient(transport=httpx.MockTransport(serve)) as http:
        yield HyperstackClient(
            http,
            base_url="http://hyperstack.test/v1",
            api_key=SecretStr("k"),
            timeout=1.0,
            create_timeout=1.0,
        )


async def outcome(call: Awaitable[Any]) -> type[ProviderError] | None:
    try:
        await call
    except ProviderError as exc:
        assert str(SAID_NO["message"]) in exc.message  # it says what Hyperstack said
        return type(exc)
    return None


@pytest.mark.parametrize("read", READS.values(), ids=READS.keys())
async def test_a_read_answered_status_false_is_unavailable(
    client: HyperstackClient, says: bool, read: Call
) -> None:
    assert await outcome(read(client)) is (None if says else Unavailable)


async def test_a_create_answered_status_false_has_no_clear_answer(
    client: HyperstackClient, says: bool
) -> None:
    """Something may have been made: the follower looks it up by its name, as after a 5xx."""
    assert await outcome(create(client)) is (None if says else OutcomeUnknown)


async def test_a_delete_answered_status_false_was_not_taken(
    client: HyperstackClient, says: bool
) -> None:
    """Raised, so the terminator sends it again later; only a success stops that."""
    assert await outcome(client.delete_vm("412001")) is (None if says else Unavailable)


@pytest.mark.parametrize("call", BEFORE_THE_CREATE.values(), ids=BEFORE_THE_CREATE.keys())
async def test_what_a_create_needs_answered_status_false_fails_only_this_attempt(
    client: HyperstackClient, says: bool, call: Call
) -> None:
    """Unavailable: no VM was asked for, so the order waits (`Rejected` would fail it)."""
    assert await outcome(call(client)) is (None if says else Unavailable)
