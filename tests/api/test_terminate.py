"""`POST /v1/orders/{id}/terminate` and `PATCH /v1/orders/{id}` (the limits): who may, in which
states, and the clear JSON error for everything else. No watcher runs here: the intent is what
the API commits; the terminator's part has its own tests (tests/watcher/test_lifecycle.py)."""

from datetime import timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Provider
from app.core.clock import utcnow
from app.core.states import OrderStatus
from app.providers.base import VM, Offer, VMState
from app.services import attempts, claims
from app.services.claims import Intent
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Attempt
from tests.factories import (
    ADMIN,
    AccountHandle,
    create_account,
    force_order_status,
    order_body,
    place_order,
)

OFFER = Offer(Provider("hyperstack"), "CANADA-1", "n3-B300x8", "B300", 8, Decimal("40.00"))


async def running(
    client: httpx.AsyncClient, engine: AsyncEngine, **order: Any
) -> tuple[AccountHandle, str]:
    """An order of a new account (with $100) whose machine runs; its first hour ($40) paid."""
    account = await create_account(client, credit="100")
    order_id = (await place_order(client, account, **order))["id"]
    maker = create_sessionmaker(engine)
    async with session_scope(maker) as session:
        intent = await claims.claim(
            session, order_id=order_id, offer=OFFER, price_with_fees=OFFER.price_per_hour
        )
    assert intent is not None
    vm = VM(Provider("hyperstack"), "412001", VMState.RUNNING, "ACTIVE", ip="203.0.113.9")
    async with session_scope(maker) as session:
        await attempts.settle_created(session, attempt_id=intent.attempt_id, vm=vm)
    async with session_scope(maker) as session:
        await attempts.settle_running(session, attempt_id=intent.attempt_id, vm=vm)
    return account, order_id


async def deploying(engine: AsyncEngine, order_id: str, offer: Offer, alternative: int) -> None:
    """The order claimed for `offer` (matched to its `alternative`): its create in flight."""
    async with session_scope(create_sessionmaker(engine)) as session:
        connection = await session.connection()
        intent: Intent | None = await connection.run_sync(
            lambda sync: claims.claim_on(
                sync,
                order_id=order_id,
                offer=offer,
                price_with_fees=offer.price_per_hour,
                alternative=alternative,
            )
        )
    assert intent is not None


def error_of(response: httpx.Response) -> dict[str, Any]:
    error: dict[str, Any] = response.json()["error"]
    return error


class TestTerminate:
    async def test_a_running_order_is_terminating_at_once_and_terminating_again_is_the_same(
        self, client: httpx.AsyncClient, engine: AsyncEngine
    ) -> None:
        account, order_id = await running(client, engine)
        path = f"/v1/orders/{order_id}/terminate"
        first = await client.post(path, headers=account.headers)
        assert first.status_code == 202
        body = first.json()
        assert (body["status"], body["terminate_reason"]) == ("terminating", "requested")
        assert body["deployment"]["status"] == "terminating"
        assert body["ssh_command"] is None  # no longer offered once it is being deleted
        second = await client.post(path, headers=account.headers)
        assert (second.status_code, second.json()["status"]) == (202, "terminating")
        events = await client.get(f"/v1/orders/{order_id}/events", headers=account.headers)
        kinds = [e["kind"] for e in events.json()]
        assert kinds.count("terminating") == 1

    async def test_a_running_order_shows_how_to_reach_it_and_what_it_was_charged(
        self, client: httpx.AsyncClient, engine: AsyncEngine
    ) -> None:
        account, order_id = await running(client, engine)
        shown = (await client.get(f"/v1/orders/{order_id}", headers=account.headers)).json()
        assert shown["ssh_command"] == "ssh ubuntu@203.0.113.9"  # Hyperstack's images' user
        assert (shown["charged_usd"], shown["terminate_reason"]) == ("40.00", None)
        assert shown["running_since"] and shown["paid_until"] > shown["running_since"]
        money = (await client.get("/v1/account", headers=account.headers)).json()
        assert (money["balance"], money["hourly_spend"], money["runway_hours"]) == (
            "60.00",
            "40.00",
            1.5,
        )
        assert money["low_balance"] is True  # 1.5 h is below the 2 h default
        # Demo mode's billed hours last a minute: 1.5 of them is 90 s on the clock.
        assert (money["billing_hour_seconds"], money["runway_seconds"]) == (60.0, 90)
        assert money["can_top_up"] is True

    async def test_a_waiting_order_is_a_409_that_says_to_cancel_it(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        order = await place_order(client, account)
        answer = await client.post(f"/v1/orders/{order['id']}/terminate", headers=account.headers)
        assert answer.status_code == 409
        error = error_of(answer)
        assert error["code"] == "not_deployed" and "cancel" in error["message"]

    @pytest.mark.parametrize(
        "status", [OrderStatus.CANCELLED, OrderStatus.EXPIRED, OrderStatus.FAILED, OrderStatus.LOST]
    )
    async def test_an_order_that_ended_is_a_409_naming_its_state(
        self, client: httpx.AsyncClient, engine: AsyncEngine, status: OrderStatus
    ) -> None:
        account = await create_account(client)
        order = await place_order(client, account)
        await force_order_status(engine, order["id"], status)
        answer = await client.post(f"/v1/orders/{order['id']}/terminate", headers=account.headers)
        assert answer.status_code == 409
        error = error_of(answer)
        assert error["code"] == "order_ended" and f"is {status}" in error["message"]

    async def test_another_accounts_order_is_a_404_and_the_admin_key_may_terminate_it(
        self, client: httpx.AsyncClient, engine: AsyncEngine
    ) -> None:
        owner, order_id = await running(client, engine)
        eve = await create_account(client, "Eve")
        for method, body in (("POST", None), ("PATCH", {"max_runtime_hours": 1})):
            path = f"/v1/orders/{order_id}" + ("/terminate" if method == "POST" else "")
            answer = await client.request(method, path, json=body, headers=eve.headers)
            assert answer.status_code == 404, method
        shown = (await client.get(f"/v1/orders/{order_id}", headers=owner.headers)).json()
        assert (shown["status"], shown["max_runtime_hours"]) == ("running", None)
        answer = await client.post(f"/v1/orders/{order_id}/terminate", headers=ADMIN)
        assert answer.status_code == 202
        assert answer.json()["terminate_reason"] == "admin"
        missing = await client.post("/v1/orders/ord_nosuchorder/terminate", headers=ADMIN)
        assert missing.status_code == 404

    async def test_without_a_key_it_is_a_401(self, client: httpx.AsyncClient) -> None:
        answer = await client.post("/v1/orders/ord_x/terminate")
        assert answer.status_code == 401


class TestLimits:
    async def test_limits_set_at_placement_are_shown(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        order = await place_order(client, account, max_runtime_hours=12, max_total_usd="500")
        assert (order["max_runtime_hours"], order["max_total_usd"]) == (12.0, "500.00")

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"max_runtime_hours": 0}, "max_runtime_hours"),
            ({"max_runtime_hours": -1}, "max_runtime_hours"),
            ({"max_runtime_hours": "soon"}, "max_runtime_hours"),
            ({"max_runtime_hours": 1.234}, "max_runtime_hours"),
            ({"max_total_usd": "0"}, "max_total_usd"),
            ({"max_total_usd": True}, "max_total_usd"),
            ({"max_total_usd": "12.345"}, "max_total_usd"),
            ({"max_total_usd": "20.00"}, "max_total_usd"),  # below one hour at $45.00
        ],
    )
    async def test_limits_that_are_not_positive_or_do_not_cover_an_hour_are_a_422(
        self, client: httpx.AsyncClient, body: dict[str, Any], field: str
    ) -> None:
        account = await create_account(client)
        placed = await client.post(
            "/v1/orders",
            json={**{"gpu_model": "B300", "gpu_count": 8, "providers": ["verda"]},
                  "max_price_per_hour": "45.00", **body},
            headers=account.headers,
        )  # fmt: skip
        assert placed.status_code == 422
        assert [d["field"] for d in error_of(placed)["details"]] == [field]
        order = await place_order(client, account)
        patched = await client.patch(
            f"/v1/orders/{order['id']}", json=body, headers=account.headers
        )
        assert patched.status_code == 422
        assert [d["field"] for d in error_of(patched)["details"]] == [field]

    @pytest.mark.parametrize(
        "shapes",
        [
            {"alternatives": [order_body(), order_body(gpu_model="H200", max_price_per_hour="60")]},
            {  # by model: each shape at max_price_per_hour or its own price
                "model": "moonshotai/Kimi-K3",
                "providers": ["verda"],
                "max_price_per_hour": "45.00",
                "prices": [
                    {"gpu_model": "H200", "gpu_count": 8, "nodes": 2, "max_price_per_hour": "60"}
                ],
            },
        ],
        ids=["alternatives", "by-model"],
    )
    async def test_a_waiting_orders_total_must_cover_an_hour_of_its_dearest_shape(
        self, client: httpx.AsyncClient, shapes: dict[str, Any]
    ) -> None:
        # As placing checks: the first shape is $45 an hour, but the order may deploy the $60 one.
        account = await create_account(client)
        placed = await client.post("/v1/orders", json=shapes, headers=account.headers)
        assert placed.status_code == 201, placed.text
        assert placed.json()["max_price_per_hour"] == "45.00"
        path = f"/v1/orders/{placed.json()['id']}"
        below = await client.patch(path, json={"max_total_usd": "45.00"}, headers=account.headers)
        assert below.status_code == 422, below.text
        error = error_of(below)
        assert error["details"][0]["field"] == "max_total_usd" and "$60.00" in error["message"]
        enough = await client.patch(path, json={"max_total_usd": "60"}, headers=account.headers)
        assert enough.status_code == 200, enough.text
        assert enough.json()["max_total_usd"] == "60.00"

    async def test_a_deploying_orders_total_must_cover_the_hour_held_for_its_create(
        self, client: httpx.AsyncClient, engine: AsyncEngine
    ) -> None:
        account = await create_account(client, credit="100")
        shapes = [order_body(), order_body(gpu_model="H200", max_price_per_hour="60")]
        placed = await client.post(
            "/v1/orders", json={"alternatives": shapes}, headers=account.headers
        )
        assert placed.status_code == 201, placed.text
        order_id = placed.json()["id"]
        h200 = Offer(Provider("hyperstack"), "CANADA-1", "n3-H200x8", "H200", 8, Decimal("55"))
        await deploying(engine, order_id, h200, alternative=2)  # $55 held
        path = f"/v1/orders/{order_id}"
        below = await client.patch(path, json={"max_total_usd": "45.00"}, headers=account.headers)
        assert below.status_code == 422, below.text
        error = error_of(below)
        assert error["details"][0]["field"] == "max_total_usd" and "$55.00" in error["message"]
        # The hour held is what the create commits, whatever the other shapes cost.
        held = await client.patch(path, json={"max_total_usd": "55"}, headers=account.headers)
        assert held.status_code == 200, held.text
        assert held.json()["status"] == "deploying"

    async def test_a_total_below_what_was_charged_already_is_a_422(
        self, client: httpx.AsyncClient, engine: AsyncEngine
    ) -> None:
        account, order_id = await running(client, engine)  # $40 charged
        path = f"/v1/orders/{order_id}"
        below = await client.patch(path, json={"max_total_usd": "39.99"}, headers=account.headers)
        assert below.status_code == 422
        error = error_of(below)
        assert error["details"][0]["field"] == "max_total_usd" and "$40.00" in error["message"]
        ok = await client.patch(path, json={"max_total_usd": "100"}, headers=account.headers)
        assert ok.status_code == 200 and ok.json()["max_total_usd"] == "100.00"
        # $100 pays two whole hours at $40: it ends when the third would begin.
        shown = ok.json()
        assert shown["terminates_at"] is not None and shown["terminates_at"] > shown["paid_until"]

    async def test_a_runtime_already_run_is_a_422_like_a_total_already_charged(
        self, client: httpx.AsyncClient, engine: AsyncEngine
    ) -> None:
        account, order_id = await running(client, engine)
        async with session_scope(create_sessionmaker(engine)) as session:
            await session.execute(
                update(Attempt)
                .where(Attempt.order_id == order_id)
                .values(billed_from=utcnow() - timedelta(hours=2, minutes=30))
            )
        path = f"/v1/orders/{order_id}"
        passed = await client.patch(path, json={"max_runtime_hours": 2}, headers=account.headers)
        assert passed.status_code == 422, passed.text
        error = error_of(passed)
        assert error["details"][0]["field"] == "max_runtime_hours"
        assert "2.5 h" in error["message"] and "terminate" in error["message"]
        shown = (await client.get(path, headers=account.headers)).json()
        assert (shown["status"], shown["max_runtime_hours"]) == ("running", None)
        below = await client.patch(path, json={"max_total_usd": "39"}, headers=account.headers)
        assert "terminate" in error_of(below)["message"]  # the two limits say it alike
        later = await client.patch(path, json={"max_runtime_hours": 3}, headers=account.headers)
        assert later.status_code == 200, later.text
        assert later.json()["terminates_at"] > utcnow().isoformat()

    async def test_only_the_limits_can_change_and_null_removes_one(
        self, client: httpx.AsyncClient, engine: AsyncEngine
    ) -> None:
        account, order_id = await running(client, engine, max_runtime_hours=12)
        path = f"/v1/orders/{order_id}"
        other = await client.patch(path, json={"name": "renamed"}, headers=account.headers)
        assert other.status_code == 422
        assert error_of(other)["details"][0]["field"] == "name"
        price = await client.patch(
            path, json={"max_price_per_hour": "1.00"}, headers=account.headers
        )
        assert price.status_code == 422
        removed = await client.patch(
            path, json={"max_runtime_hours": None}, headers=account.headers
        )
        assert removed.status_code == 200
        assert (removed.json()["max_runtime_hours"], removed.json()["terminates_at"]) == (
            None,
            None,
        )
        events = (await client.get(f"{path}/events", headers=account.headers)).json()
        limits = [e["message"] for e in events if e["kind"] == "limits"]
        assert limits[0].startswith("Terminates at") and "max runtime 12 h" in limits[0]
        assert limits[-1] == "Limits changed: max_runtime_hours removed."

    async def test_an_order_that_is_terminating_cannot_change_its_limits(
        self, client: httpx.AsyncClient, engine: AsyncEngine
    ) -> None:
        account, order_id = await running(client, engine)
        await client.post(f"/v1/orders/{order_id}/terminate", headers=account.headers)
        answer = await client.patch(
            f"/v1/orders/{order_id}", json={"max_runtime_hours": 5}, headers=account.headers
        )
        assert answer.status_code == 409 and error_of(answer)["code"] == "order_ended"
