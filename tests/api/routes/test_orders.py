"""Placing, listing, reading and cancelling orders, and each order's timeline."""

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.clock import utcnow
from app.core.ids import new_id
from app.core.states import AttemptStatus, OrderStatus
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Attempt
from tests.factories import create_account, force_order_status, order_body, place_order, ssh_key


class TestPlaceOrder:
    async def test_an_order_is_placed_waiting_with_what_was_asked(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        expires = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
        key = ssh_key("ssh-ed25519")
        response = await client.post(
            "/v1/orders",
            json=order_body(
                gpu_model="h200",
                providers=["quantacloud", "verda", "verda"],
                max_price_per_hour=38.4,
                regions=["FIN-01", "CANADA-1"],
                min_disk_gb=500,
                interconnect="nvlink",
                expires_at=expires.isoformat(),
                name="training run",
                ssh_public_key=key,
            ),
            headers=account.headers,
        )
        assert response.status_code == 201, response.text
        order = response.json()
        assert order["id"].startswith("ord_")
        assert order["status"] == "waiting"
        assert order["gpu_model"] == "H200" and order["gpu_count"] == 8
        assert order["providers"] == ["verda", "quantacloud"]
        assert order["max_price_per_hour"] == "38.40"
        assert order["regions"] == ["FIN-01", "CANADA-1"]
        assert (order["min_disk_gb"], order["interconnect"]) == (500, "nvlink")
        assert datetime.fromisoformat(order["expires_at"]) == expires
        assert (order["name"], order["ssh_public_key"]) == ("training run", key)
        assert order["deployment"] is None

    async def test_enum_fields_ignore_case(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        order = await place_order(
            client, account, providers=["Verda", "HYPERSTACK"], interconnect="SXM"
        )
        assert (order["providers"], order["interconnect"]) == (["verda", "hyperstack"], "sxm")

    async def test_placing_an_order_costs_nothing(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client, credit="10")
        await place_order(client, account, max_price_per_hour="9999")
        balance = (await client.get("/v1/account", headers=account.headers)).json()
        assert (balance["balance"], balance["held"]) == ("10.00", "0.00")

    async def test_an_order_can_be_placed_with_no_balance_at_all(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        order = await place_order(client, account)
        assert order["status"] == "waiting"


class TestBadInput:
    async def _post(self, client: httpx.AsyncClient, **overrides: object) -> httpx.Response:
        account = await create_account(client)
        response = await client.post(
            "/v1/orders", json=order_body(**overrides), headers=account.headers
        )
        listed = (await client.get("/v1/orders", headers=account.headers)).json()
        assert listed["data"] == [], "a refused order must not be stored"
        return response

    async def _assert_field_error(
        self, client: httpx.AsyncClient, field: str, **overrides: object
    ) -> None:
        response = await self._post(client, **overrides)
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "validation_error"
        assert any(d["field"].split(".")[0] == field for d in error["details"]), error

    async def test_unknown_gpu_model(self, client: httpx.AsyncClient) -> None:
        await self._assert_field_error(client, "gpu_model", gpu_model="B301")

    @pytest.mark.parametrize("count", [0, 1000, -8, 2.5, "8", True, None])
    async def test_gpu_count_out_of_range_or_not_an_integer(
        self, client: httpx.AsyncClient, count: object
    ) -> None:
        await self._assert_field_error(client, "gpu_count", gpu_count=count)

    @pytest.mark.parametrize("providers", [[], ["aws"], ["verda", "lambda"], "verda", None])
    async def test_providers_must_be_a_non_empty_subset_of_the_three(
        self, client: httpx.AsyncClient, providers: object
    ) -> None:
        await self._assert_field_error(client, "providers", providers=providers)

    async def test_an_empty_or_overlong_list_is_said_in_plain_words(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        empty = await client.post(
            "/v1/orders", json=order_body(providers=[]), headers=account.headers
        )
        assert empty.status_code == 422
        assert empty.json()["error"]["details"] == [
            {"field": "providers", "message": "must list at least one"}
        ]
        regions = [f"R-{n}" for n in range(51)]
        many = await client.post(
            "/v1/orders", json=order_body(regions=regions), headers=account.headers
        )
        assert many.json()["error"]["details"] == [
            {"field": "regions", "message": "must list at most 50"}
        ]

    @pytest.mark.parametrize(
        "price", ["-1", "0", 0, "1e12", "10000.01", "12.345", "NaN", "Infinity", "cheap", None]
    )
    async def test_negative_zero_absurd_or_imprecise_prices(
        self, client: httpx.AsyncClient, price: object
    ) -> None:
        await self._assert_field_error(client, "max_price_per_hour", max_price_per_hour=price)

    @pytest.mark.parametrize(
        "expires",
        ["a minute ago", "2030-01-01T00:00:00", "tomorrow", "9999-12-31T00:00:00Z"],
    )
    async def test_expiry_in_the_past_or_without_a_timezone(
        self, client: httpx.AsyncClient, expires: str
    ) -> None:
        if expires == "a minute ago":
            expires = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
        await self._assert_field_error(client, "expires_at", expires_at=expires)

    async def test_a_disk_larger_than_any_provider_offers_names_the_limit(
        self, client: httpx.AsyncClient
    ) -> None:
        response = await self._post(client, min_disk_gb=1_000_000)
        assert response.status_code == 422, response.text
        (detail,) = response.json()["error"]["details"]
        assert detail["field"] == "min_disk_gb" and "10000" in detail["message"], detail
        account = await create_account(client)
        accepted = await client.post(
            "/v1/orders", json=order_body(min_disk_gb=10_000), headers=account.headers
        )
        assert accepted.status_code == 201, accepted.text
        assert accepted.json()["min_disk_gb"] == 10_000

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("regions", []),
            ("regions", ["FIN 01; DROP"]),
            ("min_disk_gb", 0),
            ("interconnect", "infiniband"),
            ("name", "n" * 101),
            ("ssh_public_key", "not a key"),
        ],
    )
    async def test_other_optional_fields(
        self, client: httpx.AsyncClient, field: str, value: object
    ) -> None:
        await self._assert_field_error(client, field, **{field: value})

    async def test_an_ssh_key_is_bounded_by_the_largest_real_one(
        self, client: httpx.AsyncClient
    ) -> None:
        """RSA at 16,384 bits (OpenSSH's largest) is a 2,772-character type and blob; with a
        comment it is placed. A 16 KB line (a key padded by its comment) is a 422."""
        modulus = b"\x00" + b"\xc5" * 2048  # an mpint of 16,384 bits, its top bit set
        payload = b"\x00\x00\x00\x03\x01\x00\x01" + len(modulus).to_bytes(4, "big") + modulus
        largest = ssh_key("ssh-rsa", payload).replace("me@laptop", "ada@" + "h" * 1000)
        assert len(largest.split()[0] + " " + largest.split()[1]) == 2_772
        account = await create_account(client)
        placed = await client.post(
            "/v1/orders", json=order_body(ssh_public_key=largest), headers=account.headers
        )
        assert placed.status_code == 201, placed.text
        assert placed.json()["ssh_public_key"] == largest
        padded = ssh_key("ssh-ed25519").replace("me@laptop", "k" * 16_000)
        await self._assert_field_error(client, "ssh_public_key", ssh_public_key=padded)

    async def test_unknown_fields_are_refused_so_typos_do_not_go_unnoticed(
        self, client: httpx.AsyncClient
    ) -> None:
        await self._assert_field_error(client, "max_price", max_price="10")

    async def test_long_strings_are_refused_without_echoing_them(
        self, client: httpx.AsyncClient
    ) -> None:
        response = await self._post(client, name="x" * 50_000)
        assert response.status_code == 422
        assert len(response.content) < 2_000

    async def test_a_ten_megabyte_body_is_a_413(self, client: httpx.AsyncClient) -> None:
        response = await self._post(client, name="x" * 10_000_000)
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "payload_too_large"

    async def test_a_streamed_body_without_length_is_still_limited(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(200):
                yield b"x" * 1024

        response = await client.post("/v1/orders", content=chunks(), headers=account.headers)
        assert response.status_code == 413

    @pytest.mark.parametrize("content", [b"{bad", b"", b"[]", b'"order"', b"null", b"\xff\xfe"])
    async def test_malformed_json_and_wrong_shapes(
        self, client: httpx.AsyncClient, content: bytes
    ) -> None:
        account = await create_account(client)
        response = await client.post(
            "/v1/orders",
            content=content,
            headers={**account.headers, "Content-Type": "application/json"},
        )
        assert response.status_code == 422, (content, response.text)
        assert response.json()["error"]["code"] in ("invalid_json", "validation_error")


class TestListAndGet:
    async def test_orders_are_listed_newest_first_in_pages(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        placed = [(await place_order(client, account, name=f"o{i}"))["id"] for i in range(5)]
        seen: list[str] = []
        cursor = None
        while True:
            params: dict[str, str | int] = {"limit": 2}
            if cursor:
                params["cursor"] = cursor
            page = (await client.get("/v1/orders", params=params, headers=account.headers)).json()
            seen += [o["id"] for o in page["data"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == list(reversed(placed))

    async def test_a_full_last_page_says_it_is_the_last(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        for _ in range(4):
            await place_order(client, account)
        first = (await client.get("/v1/orders?limit=2", headers=account.headers)).json()
        second = (
            await client.get(
                f"/v1/orders?limit=2&cursor={first['next_cursor']}", headers=account.headers
            )
        ).json()
        assert len(second["data"]) == 2
        assert second["next_cursor"] is None

    async def test_orders_can_be_filtered_by_status(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        kept = await place_order(client, account)
        gone = await place_order(client, account)
        await client.post(f"/v1/orders/{gone['id']}/cancel", headers=account.headers)
        waiting = (
            await client.get("/v1/orders", params={"status": "waiting"}, headers=account.headers)
        ).json()
        cancelled = (
            await client.get("/v1/orders", params={"status": "cancelled"}, headers=account.headers)
        ).json()
        assert [o["id"] for o in waiting["data"]] == [kept["id"]]
        assert [o["id"] for o in cancelled["data"]] == [gone["id"]]

    @pytest.mark.parametrize(
        "params", [{"status": "paused"}, {"limit": 0}, {"limit": 101}, {"cursor": "x' OR 1=1"}]
    )
    async def test_bad_list_parameters_are_a_422(
        self, client: httpx.AsyncClient, params: dict[str, str | int]
    ) -> None:
        account = await create_account(client)
        response = await client.get("/v1/orders", params=params, headers=account.headers)
        assert response.status_code == 422, params

    async def test_one_order_by_id(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        placed = await place_order(client, account)
        response = await client.get(f"/v1/orders/{placed['id']}", headers=account.headers)
        assert response.status_code == 200
        one = response.json()
        # Read alone, a waiting order also carries its expected wait (tests/api/test_stock.py).
        assert one.pop("estimate")["status"] == "insufficient_data"
        assert one == placed

    async def test_a_deployed_order_shows_its_deployment(
        self, client: httpx.AsyncClient, engine: AsyncEngine
    ) -> None:
        account = await create_account(client)
        placed = await place_order(client, account)
        await force_order_status(engine, placed["id"], OrderStatus.DEPLOYED)
        async with session_scope(create_sessionmaker(engine)) as session:
            session.add(
                Attempt(
                    id=new_id("dep"),
                    order_id=placed["id"],
                    number=1,
                    provider="verda",
                    region="FIN-01",
                    sku="8B300.240V",
                    vm_name=f"ap-{placed['id']}-1",
                    provider_vm_id="vm-123",
                    price_per_hour=Decimal("41.52"),
                    price_per_hour_with_fees=Decimal("43.70"),
                    ip="203.0.113.7",
                    status="running",
                    created_at=utcnow(),
                    updated_at=utcnow(),
                )
            )
        shown = (await client.get(f"/v1/orders/{placed['id']}", headers=account.headers)).json()
        assert shown["deployment"] == {
            "provider": "verda",
            "region": "FIN-01",
            "instance_type": "8B300.240V",
            "provider_vm_id": "vm-123",
            "nodes": 1,
            "alternative": 1,
            "price_per_hour": "41.52",
            "price_per_hour_with_fees": "43.70",
            "ip": "203.0.113.7",
            "status": "running",
            "created_at": shown["deployment"]["created_at"],
            # nothing reported by the machine itself (POST /v1/machines/report)
            "stage": None,
            "stage_detail": None,
            "progress": None,
            "ready_at": None,
            "time_to_first_token_seconds": None,
        }
        assert shown["machines"] == [
            {
                "provider_vm_id": "vm-123",
                "name": f"ap-{placed['id']}-1",
                "ip": "203.0.113.7",
                "state": "running",
                "provider_status": None,
            }
        ]
        assert shown["login_ip"] is None  # a single machine is reached at its own address
        listed = (await client.get("/v1/orders", headers=account.headers)).json()
        assert listed["data"][0]["deployment"]["provider_vm_id"] == "vm-123"

    @pytest.mark.parametrize("ended", [AttemptStatus.TERMINATED, AttemptStatus.LOST])
    async def test_an_ended_clusters_nodes_are_gone_whatever_they_last_said(
        self, client: httpx.AsyncClient, engine: AsyncEngine, ended: AttemptStatus
    ) -> None:
        account = await create_account(client)
        placed = await place_order(client, account, nodes=2)
        await force_order_status(engine, placed["id"], OrderStatus(str(ended)))
        nodes = [
            {"id": f"vm-{n}", "name": f"ap-{placed['id']}-{n}", "ip": f"10.0.0.{n}",
             "state": "running", "provider_status": "ACTIVE"}
            for n in (1, 2)
        ]  # fmt: skip
        async with session_scope(create_sessionmaker(engine)) as session:
            session.add(
                Attempt(
                    id=new_id("dep"),
                    order_id=placed["id"],
                    number=1,
                    provider="hyperstack",
                    region="CANADA-1",
                    sku="n3-B300x8",
                    nodes=2,
                    machines=nodes,
                    vm_name=f"ap-{placed['id']}",
                    provider_vm_id="nodes:vm-1,vm-2",
                    price_per_hour=Decimal("80"),
                    price_per_hour_with_fees=Decimal("84"),
                    status=ended,
                    created_at=utcnow(),
                    updated_at=utcnow(),
                    ended_at=utcnow(),
                )
            )
        shown = (await client.get(f"/v1/orders/{placed['id']}", headers=account.headers)).json()
        assert [(m["provider_vm_id"], m["state"]) for m in shown["machines"]] == [
            ("vm-1", "gone"),
            ("vm-2", "gone"),
        ]

    async def test_a_missing_order_is_a_404(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        response = await client.get(f"/v1/orders/{new_id('ord')}", headers=account.headers)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"


class TestIsolation:
    async def test_another_accounts_order_is_a_404_everywhere(
        self, client: httpx.AsyncClient
    ) -> None:
        ada = await create_account(client, "Ada")
        eve = await create_account(client, "Eve")
        order = await place_order(client, ada)
        for method, path in (
            ("GET", f"/v1/orders/{order['id']}"),
            ("GET", f"/v1/orders/{order['id']}/events"),
            ("POST", f"/v1/orders/{order['id']}/cancel"),
        ):
            response = await client.request(method, path, headers=eve.headers)
            assert response.status_code == 404, (method, path)
        assert (await client.get("/v1/orders", headers=eve.headers)).json()["data"] == []
        still = (await client.get(f"/v1/orders/{order['id']}", headers=ada.headers)).json()
        assert still["status"] == "waiting"


class TestCancel:
    async def test_a_waiting_order_is_cancelled(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        order = await place_order(client, account)
        response = await client.post(f"/v1/orders/{order['id']}/cancel", headers=account.headers)
        assert response.status_code == 200
        assert response.json()["status"] == "cancelled"

    async def test_cancelling_twice_is_a_409_that_says_why(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        order = await place_order(client, account)
        await client.post(f"/v1/orders/{order['id']}/cancel", headers=account.headers)
        response = await client.post(f"/v1/orders/{order['id']}/cancel", headers=account.headers)
        assert response.status_code == 409
        error = response.json()["error"]
        assert error["code"] == "order_not_waiting"
        assert "cancelled" in error["message"]

    async def test_an_order_past_waiting_cannot_be_cancelled(
        self, client: httpx.AsyncClient, engine: AsyncEngine
    ) -> None:
        account = await create_account(client)
        order = await place_order(client, account)
        await force_order_status(engine, order["id"], OrderStatus.DEPLOYING)
        response = await client.post(f"/v1/orders/{order['id']}/cancel", headers=account.headers)
        assert response.status_code == 409
        assert "deploying" in response.json()["error"]["message"]
        shown = (await client.get(f"/v1/orders/{order['id']}", headers=account.headers)).json()
        assert shown["status"] == "deploying"


class TestEvents:
    async def test_the_timeline_tells_what_happened_in_sentences(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        order = await place_order(client, account, providers=["hyperstack"], regions=["CANADA-1"])
        await client.post(f"/v1/orders/{order['id']}/cancel", headers=account.headers)
        events = (
            await client.get(f"/v1/orders/{order['id']}/events", headers=account.headers)
        ).json()
        assert [e["kind"] for e in events] == ["placed", "cancelled"]
        assert events[0]["message"] == (
            "Order placed: 8x B300 on Hyperstack in CANADA-1 at up to $45.00/h incl. fees. "
            "Waiting for stock."
        )
        assert events[1]["message"] == "Cancelled by you."
        assert all(datetime.fromisoformat(e["created_at"]).tzinfo is not None for e in events)


class TestIdempotency:
    async def test_same_key_and_body_replays_and_creates_nothing_new(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        headers = {**account.headers, "Idempotency-Key": "order-7f3a"}
        first = await client.post("/v1/orders", json=order_body(), headers=headers)
        again = await client.post(
            "/v1/orders", json=order_body(max_price_per_hour=45), headers=headers
        )
        assert first.status_code == again.status_code == 201
        assert again.json() == first.json()
        assert again.headers["idempotent-replayed"] == "true"
        assert "idempotent-replayed" not in first.headers
        listed = (await client.get("/v1/orders", headers=account.headers)).json()
        assert len(listed["data"]) == 1

    async def test_same_key_with_a_different_body_is_a_422(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        headers = {**account.headers, "Idempotency-Key": "order-7f3a"}
        await client.post("/v1/orders", json=order_body(), headers=headers)
        response = await client.post("/v1/orders", json=order_body(gpu_count=4), headers=headers)
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "idempotency_key_reused"
        assert len((await client.get("/v1/orders", headers=account.headers)).json()["data"]) == 1

    async def test_keys_belong_to_one_account(self, client: httpx.AsyncClient) -> None:
        ada = await create_account(client, "Ada")
        bob = await create_account(client, "Bob")
        for account in (ada, bob):
            response = await client.post(
                "/v1/orders",
                json=order_body(),
                headers={**account.headers, "Idempotency-Key": "shared"},
            )
            assert response.status_code == 201
            assert "idempotent-replayed" not in response.headers

    async def test_a_refused_request_stores_nothing_under_its_key(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        headers = {**account.headers, "Idempotency-Key": "retry-me"}
        bad = await client.post("/v1/orders", json=order_body(gpu_count=0), headers=headers)
        assert bad.status_code == 422
        good = await client.post("/v1/orders", json=order_body(), headers=headers)
        assert good.status_code == 201

    async def test_a_key_older_than_a_day_starts_a_new_request(
        self, client: httpx.AsyncClient, engine: AsyncEngine
    ) -> None:
        from sqlalchemy import update

        from app.storage.models import IdempotencyKey

        account = await create_account(client)
        headers = {**account.headers, "Idempotency-Key": "old"}
        first = (await client.post("/v1/orders", json=order_body(), headers=headers)).json()
        async with session_scope(create_sessionmaker(engine)) as session:
            await session.execute(
                update(IdempotencyKey).values(created_at=utcnow() - timedelta(hours=25))
            )
        second = await client.post("/v1/orders", json=order_body(), headers=headers)
        assert second.status_code == 201
        assert second.json()["id"] != first["id"]

    async def test_an_overlong_key_is_a_422(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        response = await client.post(
            "/v1/orders",
            json=order_body(),
            headers={**account.headers, "Idempotency-Key": "k" * 256},
        )
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "invalid_idempotency_key"

    async def test_concurrent_retries_with_one_key_place_one_order(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        headers = {**account.headers, "Idempotency-Key": "burst"}
        responses = await asyncio.gather(
            *(client.post("/v1/orders", json=order_body(), headers=headers) for _ in range(8))
        )
        assert {r.status_code for r in responses} == {201}
        assert len({r.json()["id"] for r in responses}) == 1
        listed = (await client.get("/v1/orders", headers=account.headers)).json()
        assert len(listed["data"]) == 1
