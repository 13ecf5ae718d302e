"""Who a request counts against in the in-flight bounds: the account of a key the service has
seen authenticate, else the client's address; and the count of places per share."""

import httpx
import pytest
from fastapi import FastAPI
from starlette.types import Scope

from app.api.shares import (
    ADMIN_SHARE,
    KnownKeys,
    Places,
    account_share,
    address_share,
    bearer_key,
)
from tests.factories import create_account


def _scope(address: str | None = "203.0.113.7", authorization: str | None = None) -> Scope:
    headers = [] if authorization is None else [(b"authorization", authorization.encode())]
    return {
        "type": "http",
        "path": "/v1/orders",
        "client": None if address is None else (address, 50000),
        "headers": headers,
    }


@pytest.mark.parametrize(
    ("address", "share"),
    [
        ("203.0.113.7", "address 203.0.113.7"),
        ("2001:db8:1:2:aaaa::1", "address 2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "address 2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "address 2001:db8:1:3::/64"),
        ("::ffff:203.0.113.7", "address 203.0.113.7"),
        ("testclient", "address testclient"),
        (None, "address unknown"),
    ],
)
def test_an_address_counts_alone_and_an_ipv6_address_by_its_64(
    address: str | None, share: str
) -> None:
    assert address_share(_scope(address)) == share


@pytest.mark.parametrize(
    ("header", "key"),
    [("Bearer k-1", "k-1"), ("bearer k-1", "k-1"), ("Basic k-1", None), ("Bearer ", None)],
)
def test_the_key_is_read_as_the_auth_reads_it(header: str, key: str | None) -> None:
    assert bearer_key(_scope(authorization=header)) == key


def test_a_key_counts_against_its_account_only_once_it_has_authenticated() -> None:
    known = KnownKeys()
    with_key = _scope(authorization="Bearer key-of-ada")
    assert known.share_of(with_key) == "address 203.0.113.7"  # not seen yet: its address
    known.learn("key-of-ada", account_share("acct_ada"))
    assert known.share_of(with_key) == "account acct_ada"
    elsewhere = _scope("198.51.100.1", authorization="Bearer key-of-ada")
    assert known.share_of(elsewhere) == "account acct_ada"  # one share from any address
    made_up = _scope(authorization="Bearer key-of-nobody")
    assert known.share_of(made_up) == "address 203.0.113.7"
    known.forget("key-of-ada")
    assert known.share_of(with_key) == "address 203.0.113.7"


def test_the_keys_kept_are_bounded_and_the_least_recently_seen_go_first() -> None:
    known = KnownKeys(kept=2)
    for name in ("a", "b"):
        known.learn(f"key-{name}", account_share(name))
    known.share_of(_scope(authorization="Bearer key-a"))  # seen again: kept over b
    known.learn("key-c", account_share("c"))
    shares = [known.share_of(_scope(authorization=f"Bearer key-{n}")) for n in "abc"]
    assert shares == ["account a", "address 203.0.113.7", "account c"]


def test_places_refuse_a_share_at_its_part_and_everyone_when_all_are_held() -> None:
    places = Places(limit=3, per_share=2)
    for share in ("a", "a", "b"):
        assert places.full_for(share) is None
        places.take(share)
    assert places.full_for("a") == "process"
    assert places.full_for("c") == "process"
    places.give_back("b")
    assert places.full_for("a") == "client"  # the place freed is not a's to take
    assert places.full_for("c") is None
    places.give_back("a")
    places.give_back("a")
    assert (places.held, dict(places.by_share)) == (0, {})


def test_a_share_alone_uses_the_spare_room_but_never_the_others_part() -> None:
    places = Places(limit=10, per_share=2)
    for _ in range(8):  # past its part of 2, while more than 2 places stay free
        assert places.full_for("a") is None
        places.take("a")
    assert places.full_for("a") == "client"  # 2 free: kept for the others
    assert places.full_for("b") is None


async def test_the_auth_teaches_the_service_each_key_it_accepts(
    app: FastAPI, client: httpx.AsyncClient, admin_headers: dict[str, str]
) -> None:
    known: KnownKeys = app.state.known_keys
    account = await create_account(client)
    as_account = _scope(authorization=f"Bearer {account.api_key}")
    as_admin = _scope(authorization=admin_headers["Authorization"])
    assert known.share_of(as_account) == "address 203.0.113.7"
    assert (await client.get("/v1/account", headers=account.headers)).status_code == 200
    assert known.share_of(as_account) == account_share(account.id)
    assert known.share_of(as_admin) == ADMIN_SHARE  # create_account used the admin key
    # A key remembered that no longer authenticates (an admin key reset) is forgotten.
    known.learn("a-key-since-reset", ADMIN_SHARE)
    stale = {"Authorization": "Bearer a-key-since-reset"}
    assert (await client.get("/v1/account", headers=stale)).status_code == 401
    assert known.share_of(_scope(authorization=stale["Authorization"])) == "address 203.0.113.7"
