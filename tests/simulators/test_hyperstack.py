"""The Hyperstack simulator over HTTP: shapes, auth, limits, lifecycle, stock and faults."""

import asyncio
from decimal import Decimal
from typing import Any

import httpx
import pytest

from app.core.catalogue import GPU_MODELS
from app.simulators.hyperstack import HyperstackSimulator, build_app
from app.simulators.hyperstack.simulator import stock_bucket
from tests.clock import FakeClock
from tests.fixtures.simulators import in_process, mounted
from tests.waiting import eventually

KEY = {"api_key": "sim-key"}
IMAGE = "Ubuntu Server 22.04 LTS R535 CUDA 12.2"
H100 = "H100-80G-PCIe"  # Hyperstack's name for an H100 it sells in CANADA-1 and NORWAY-1
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB5cnVsqeu6woWI8fLxtwtQqatcnRNQyYFRM/QGmv8As me"


sim, client = in_process(HyperstackSimulator, build_app)


async def set_stock(client: httpx.AsyncClient, sku: str, region: str, quantity: int) -> None:
    response = await client.put(
        "/_sim/stock", json={"sku": sku, "region": region, "quantity": quantity}
    )
    assert response.status_code == 200, response.text


def vm_body(**overrides: Any) -> dict[str, Any]:
    body = {
        "name": "ap-01jd3x-1",
        "environment_name": "default-CANADA-1",
        "flavor_name": "n3-H100x1",
        "key_name": "autoprovision",
        "image_name": IMAGE,
        "count": 1,
        "assign_floating_ip": True,
        "labels": ["ap-order-01jd3x"],
    }
    return {**body, **overrides}


async def create(client: httpx.AsyncClient, **overrides: Any) -> httpx.Response:
    return await client.post("/v1/core/virtual-machines", json=vm_body(**overrides), headers=KEY)


async def stock_of(client: httpx.AsyncClient, sku: str, region: str) -> int:
    catalog = (await client.get("/_sim/catalog")).json()
    return int(next(e["stock"] for e in catalog if (e["sku"], e["region"]) == (sku, region)))


async def outcomes(client: httpx.AsyncClient) -> list[str]:
    return [c["outcome"] for c in (await client.get("/_sim/creates")).json()]


async def instance(client: httpx.AsyncClient, vm_id: int) -> dict[str, Any]:
    response = await client.get(f"/v1/core/virtual-machines/{vm_id}", headers=KEY)
    assert response.status_code == 200, response.text
    return dict(response.json()["instance"])


async def watch(client: httpx.AsyncClient, clock: FakeClock, vm_id: int, until: str) -> list[str]:
    """Read a VM as simulated time passes until its status is `until`; every distinct status
    seen, in order."""
    seen: list[str] = []

    async def reached() -> bool:
        status: str = (await instance(client, vm_id))["status"]
        if not seen or seen[-1] != status:
            seen.append(status)
        return status == until

    await eventually(reached, interval=0.02, clock=clock, what=lambda: f"{until} (seen: {seen})")
    return seen


def age(sim: HyperstackSimulator, vm_id: int, progress: float) -> None:
    """Move a VM's boot clock to `progress` (1 = booted) without waiting."""
    sim.vms[str(vm_id)].started = sim.clock() - progress * sim.boot_seconds


class TestAuth:
    @pytest.mark.parametrize("headers", [{}, {"api_key": "wrong"}, {"Authorization": "sim-key"}])
    async def test_anything_but_the_key_in_the_api_key_header_is_refused(
        self, client: httpx.AsyncClient, headers: dict[str, str]
    ) -> None:
        response = await client.get("/v1/core/flavors", headers=headers)
        assert response.status_code == 401
        body = response.json()
        assert body["status"] is False and body["error_reason"] == "unauthorized"

    async def test_the_control_api_needs_no_key(self, client: httpx.AsyncClient) -> None:
        assert (await client.get("/_sim/catalog")).status_code == 200

    async def test_unknown_paths_and_methods_answer_in_hyperstacks_envelope(
        self, client: httpx.AsyncClient
    ) -> None:
        nowhere = await client.get("/v1/core/nothing-here", headers=KEY)
        assert nowhere.status_code == 404
        assert nowhere.json() == {
            "status": False,
            "message": "Resource not found",
            "error_reason": "not_found",
        }
        wrong = await client.put("/v1/core/regions", headers=KEY)
        assert wrong.status_code == 405 and "GET" in wrong.headers["allow"]
        assert (wrong.json()["status"], wrong.json()["error_reason"]) == (
            False,
            "method_not_allowed",
        )


class TestCatalogue:
    async def test_flavors_are_grouped_by_gpu_and_region(self, client: httpx.AsyncClient) -> None:
        await set_stock(client, "n3-H100x8", "CANADA-1", 2)
        body = (await client.get("/v1/core/flavors", headers=KEY)).json()
        assert body["status"] is True and body["message"]
        for group in body["data"]:
            assert {f["gpu"] for f in group["flavors"]} == {group["gpu"]}
            assert {f["region_name"] for f in group["flavors"]} == {group["region_name"]}
        flavors = {(f["name"], f["region_name"]): f for g in body["data"] for f in g["flavors"]}
        h100 = flavors[("n3-H100x8", "CANADA-1")]
        assert h100["stock_available"] is True
        assert flavors[("n3-H100x8", "NORWAY-1")]["stock_available"] is False
        assert {"cpu", "ram", "disk", "ephemeral", "gpu_count", "labels", "features"} <= set(h100)
        assert flavors[("n1-cpu-small", "US-1")]["gpu"] == ""
        assert ("n3-H100x8-k8s", "CANADA-1") in flavors

    async def test_flavors_can_be_filtered_by_region(self, client: httpx.AsyncClient) -> None:
        body = (await client.get("/v1/core/flavors?region=NORWAY-1", headers=KEY)).json()
        assert {g["region_name"] for g in body["data"]} == {"NORWAY-1"}

    async def test_stocks_count_deployable_slots_consistent_with_the_set_stock(
        self, client: httpx.AsyncClient
    ) -> None:
        await set_stock(client, "n3-H100x1", "CANADA-1", 3)
        await set_stock(client, "n3-H100x8", "CANADA-1", 2)
        body = (await client.get("/v1/core/stocks", headers=KEY)).json()
        canada = next(s for s in body["stocks"] if s["region"] == "CANADA-1")
        assert canada["stock-type"] == "GPU"
        h100 = next(m for m in canada["models"] if m["model"] == "H100-80G-PCIe")
        assert h100["configurations"] == {"1x": 3, "2x": 0, "4x": 0, "8x": 2, "10x": 0}
        assert h100["available"] == "10+"  # 19 GPUs, bucketed as the real API does
        assert h100["planned_7_days"] is None
        norway = next(s for s in body["stocks"] if s["region"] == "NORWAY-1")
        assert (
            next(m for m in norway["models"] if m["model"] == "H100-80G-PCIe")["available"] == "0"
        )

    @pytest.mark.parametrize(
        ("gpus", "bucket"),
        [(0, "0"), (9, "9"), (10, "10+"), (24, "10+"), (25, "25+"), (150, "100+"), (999, "200+")],
    )
    def test_stock_buckets(self, gpus: int, bucket: str) -> None:
        assert stock_bucket(gpus) == bucket

    async def test_a_forecast_set_shows_on_its_model_and_region_until_a_reset(
        self, client: httpx.AsyncClient
    ) -> None:
        planned = {"planned_7_days": "10+", "planned_30_days": "25+"}
        body = {"region": "CANADA-1", "gpu_model": H100, **planned}
        response = await client.put("/_sim/forecast", json=body)
        assert response.status_code == 200, response.text
        assert response.json() == {**body, "planned_100_days": None}

        def forecast(stocks: dict[str, Any], region: str, model: str) -> list[str | None]:
            models = next(s["models"] for s in stocks["stocks"] if s["region"] == region)
            row = next(m for m in models if m["model"] == model)
            return [row["planned_7_days"], row["planned_30_days"], row["planned_100_days"]]

        stocks = (await client.get("/v1/core/stocks", headers=KEY)).json()
        assert forecast(stocks, "CANADA-1", "H100-80G-PCIe") == ["10+", "25+", None]
        assert forecast(stocks, "NORWAY-1", "H100-80G-PCIe") == [None, None, None]
        assert forecast(stocks, "CANADA-1", "H100-80G-PCIe-NVLink") == [None, None, None]

        await client.post("/_sim/reset")
        stocks = (await client.get("/v1/core/stocks", headers=KEY)).json()
        assert forecast(stocks, "CANADA-1", "H100-80G-PCIe") == [None, None, None]

    @pytest.mark.parametrize(
        ("body", "status"),
        [
            ({"region": "MARS-1", "gpu_model": H100}, 404),
            ({"region": ["CANADA-1"], "gpu_model": H100}, 404),
            ({"region": "CANADA-1", "gpu_model": "H100"}, 404),  # our name, not Hyperstack's
            ({"region": "CANADA-1", "gpu_model": H100, "planned_7_days": 10}, 422),
            ({"region": "CANADA-1", "gpu_model": H100, "planned_7_days": ""}, 422),
            ({"region": "CANADA-1", "gpu_model": H100, "planned_30_days": "9" * 21}, 422),
        ],
    )
    async def test_a_forecast_for_no_listed_model_or_with_no_string_is_refused(
        self, client: httpx.AsyncClient, body: dict[str, Any], status: int
    ) -> None:
        response = await client.put("/_sim/forecast", json=body)
        assert response.status_code == status, response.text
        control = {"region": "CANADA-1", "gpu_model": H100, "planned_7_days": "7"}
        assert (await client.put("/_sim/forecast", json=control)).status_code == 200

    async def test_the_pricebook_is_a_bare_array_of_per_gpu_prices(
        self, client: httpx.AsyncClient
    ) -> None:
        rows = (await client.get("/v1/pricebook", headers=KEY)).json()
        assert isinstance(rows, list)
        prices = {r["name"]: r["value"] for r in rows}
        assert prices["H100-80G-PCIe"] == 2.4 and prices["B300-SXM"] == 5.6
        assert "A100-80G-SXM4" not in prices  # in the flavor list, but no price row
        assert {"id", "original_value", "discount_applied", "start_time"} <= set(rows[0])

    async def test_pricebook_values_can_come_as_decimal_strings(
        self, client: httpx.AsyncClient
    ) -> None:
        await client.put(
            "/_sim/config", json={"pricebook_string_values": True, "unpriced_gpus": []}
        )
        prices = {
            r["name"]: r["value"] for r in (await client.get("/v1/pricebook", headers=KEY)).json()
        }
        assert prices["H100-80G-PCIe"] == "2.400000000"
        assert prices["A100-80G-SXM4"] == "1.600000000"

    async def test_every_catalogue_entry_has_a_realistic_price(
        self, client: httpx.AsyncClient
    ) -> None:
        catalog = (await client.get("/_sim/catalog")).json()
        by_key = {(e["sku"], e["region"]): Decimal(e["price_per_hour"]) for e in catalog}
        assert all(e["gpu_model"] in GPU_MODELS for e in catalog)
        assert all(price > 0 for price in by_key.values())
        assert Decimal(40) <= by_key[("n3-B300-SXM6x8", "US-1")] <= Decimal(50)
        assert Decimal(25) <= by_key[("n3-H200x8", "US-1")] <= Decimal(30)
        assert Decimal(18) <= by_key[("n3-H100x8", "CANADA-1")] <= Decimal(24)
        assert Decimal(2) <= by_key[("n3-H100x1", "CANADA-1")] <= Decimal(3)
        assert {e["region"] for e in catalog} == {"CANADA-1", "NORWAY-1", "US-1"}
        wanted = {"B300", "B200", "H200", "H100", "A100-80G", "L40", "RTX-PRO-6000", "RTX-A6000"}
        assert wanted <= {e["gpu_model"] for e in catalog}

    async def test_regions_gpus_images_and_credit(self, client: httpx.AsyncClient) -> None:
        regions = (await client.get("/v1/core/regions", headers=KEY)).json()["regions"]
        assert [r["name"] for r in regions] == ["CANADA-1", "NORWAY-1", "US-1"]
        gpus = (await client.get("/v1/core/gpus", headers=KEY)).json()["gpu_list"]
        assert "H200-141G-SXM5" in {g["name"] for g in gpus}
        images = (await client.get("/v1/core/images?region=US-1", headers=KEY)).json()["images"]
        assert [g["region_name"] for g in images] == ["US-1"]
        assert IMAGE in {i["name"] for i in images[0]["images"]}
        credit = (await client.get("/v1/billing/user-credit/credit", headers=KEY)).json()
        assert credit["data"] == {"credit": 10000.0, "threshold": 0.0, "can_create_instance": True}


class TestEnvironmentsAndKeypairs:
    async def test_an_environment_is_made_once_per_name(self, client: httpx.AsyncClient) -> None:
        body = {"name": "autoprovision-us-1", "region": "US-1"}
        made = await client.post("/v1/core/environments", json=body, headers=KEY)
        assert made.status_code == 200
        assert made.json()["environment"]["region"] == "US-1"
        again = await client.post("/v1/core/environments", json=body, headers=KEY)
        assert (again.status_code, again.json()["error_reason"]) == (409, "conflict")
        bad = await client.post(
            "/v1/core/environments", json={"name": "x", "region": "MARS-1"}, headers=KEY
        )
        assert bad.status_code == 400
        listed = await client.get("/v1/core/environments?search=us-1", headers=KEY)
        assert [e["name"] for e in listed.json()["environments"]] == ["autoprovision-us-1"]

    async def test_key_pairs_are_imported_into_an_environment(
        self, client: httpx.AsyncClient
    ) -> None:
        body = {"name": "me", "environment_name": "default-CANADA-1", "public_key": PUBLIC_KEY}
        made = await client.post("/v1/core/keypairs", json=body, headers=KEY)
        assert made.status_code == 200
        keypair = made.json()["keypair"]
        assert keypair["environment"]["name"] == "default-CANADA-1"
        assert keypair["fingerprint"].count(":") == 15
        again = await client.post("/v1/core/keypairs", json=body, headers=KEY)
        assert again.status_code == 409
        nowhere = await client.post(
            "/v1/core/keypairs", json={**body, "environment_name": "nope"}, headers=KEY
        )
        assert nowhere.status_code == 404
        junk = await client.post(
            "/v1/core/keypairs", json={**body, "name": "j", "public_key": "hello"}, headers=KEY
        )
        assert (junk.status_code, junk.json()["error_reason"]) == (400, "bad_request")
        page = (await client.get("/v1/core/keypairs?page=2&pageSize=1", headers=KEY)).json()
        assert ([k["name"] for k in page["keypairs"]], page["count"]) == (["me"], 2)


class TestCreate:
    async def test_a_create_answers_instances_and_takes_one_from_stock(
        self, client: httpx.AsyncClient
    ) -> None:
        await set_stock(client, "n3-H100x1", "CANADA-1", 2)
        response = await create(client)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["status"] is True
        [instance] = body["instances"]
        assert isinstance(instance["id"], int) and instance["status"] == "CREATING"
        assert instance["labels"] == ["ap-order-01jd3x"] and instance["floating_ip"] is None
        assert instance["environment"]["region"] == "CANADA-1"
        assert await stock_of(client, "n3-H100x1", "CANADA-1") == 1
        vms = (await client.get("/_sim/vms")).json()
        assert [v["id"] for v in vms] == [str(instance["id"])]
        assert await outcomes(client) == ["created"]

    async def test_no_stock_is_a_409_conflict(self, client: httpx.AsyncClient) -> None:
        response = await create(client)
        assert response.status_code == 409
        assert response.json() == {
            "status": False,
            "message": "Flavor n3-H100x1 is out of stock in CANADA-1",
            "error_reason": "conflict",
        }
        assert await outcomes(client) == ["no_capacity"]

    @pytest.mark.parametrize(
        ("config", "billed"),
        [
            ({}, "2.40672"),  # the flavor's $2.40 and the pricebook's `PublicIP` row
            ({"public_ip_priced": False}, "2.40"),  # no row: nothing billed for it
        ],
    )
    async def test_a_vm_bills_its_public_ip_at_the_pricebooks_row(
        self, client: httpx.AsyncClient, config: dict[str, bool], billed: str
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0, **config})
        await set_stock(client, "n3-H100x1", "CANADA-1", 1)
        assert (await create(client, assign_floating_ip=True)).status_code == 200
        [vm] = (await client.get("/_sim/vms")).json()
        assert vm["price_per_hour"] == billed
        assert (await client.get("/_sim/balance")).json()["hourly_charge"] == billed
        rows = {r["name"] for r in (await client.get("/v1/pricebook", headers=KEY)).json()}
        assert ("PublicIP" in rows) == (config == {})

    async def test_too_little_credit_is_a_400(self, client: httpx.AsyncClient) -> None:
        await set_stock(client, "n3-H100x1", "CANADA-1", 1)
        await client.put("/_sim/config", json={"balance": "2.39"})
        response = await create(client)
        assert response.status_code == 400
        assert response.json()["message"] == "Insufficient balance to create the resource"
        assert response.json()["error_reason"] == "bad_request"
        assert await stock_of(client, "n3-H100x1", "CANADA-1") == 1
        assert await outcomes(client) == ["insufficient_funds"]

    @pytest.mark.parametrize(
        ("overrides", "status"),
        [
            ({"name": None}, 400),
            ({"name": "x" * 51}, 400),
            ({"count": 0}, 400),
            ({"count": 21}, 400),
            ({"image_name": None}, 400),
            ({"labels": "not-a-list"}, 400),
            ({"security_rules": [{"direction": "ingress"}]}, 400),
            ({"environment_name": "nope"}, 404),
            ({"flavor_name": "n9-nothing"}, 404),
            ({"flavor_name": "n3-H200x8"}, 400),  # sold in US-1 and NORWAY-1, not CANADA-1
            ({"key_name": "nope"}, 404),
            ({"image_name": "Windows 95"}, 404),
        ],
    )
    async def test_bad_requests_are_refused(
        self, client: httpx.AsyncClient, overrides: dict[str, Any], status: int
    ) -> None:
        await set_stock(client, "n3-H100x1", "CANADA-1", 1)
        response = await create(client, **overrides)
        assert response.status_code == status
        assert response.json()["status"] is False
        assert await outcomes(client) == ["rejected"]
        assert await stock_of(client, "n3-H100x1", "CANADA-1") == 1


class TestLifecycle:
    async def test_a_vm_goes_creating_build_active(
        self, client: httpx.AsyncClient, fake_clock: FakeClock
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0.5})
        await set_stock(client, "n3-H100x1", "CANADA-1", 1)
        vm_id = (await create(client)).json()["instances"][0]["id"]
        assert await watch(client, fake_clock, vm_id, "ACTIVE") == ["CREATING", "BUILD", "ACTIVE"]

    async def test_the_floating_ip_comes_a_little_after_active(
        self, client: httpx.AsyncClient, sim: HyperstackSimulator
    ) -> None:
        await set_stock(client, "n3-H100x1", "CANADA-1", 1)
        vm_id = (await create(client)).json()["instances"][0]["id"]
        views = []
        for progress in (0.1, 0.5, 1.05, 1.3):
            age(sim, vm_id, progress)
            got = await instance(client, vm_id)
            views.append((got["status"], got["floating_ip"] is not None))
        assert views == [
            ("CREATING", False),
            ("BUILD", False),
            ("ACTIVE", False),
            ("ACTIVE", True),
        ]
        assert (await instance(client, vm_id))["floating_ip_status"] == "ATTACHED"

    async def test_fail_after_accept_ends_in_error(
        self, client: httpx.AsyncClient, fake_clock: FakeClock
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0.2})
        await set_stock(client, "n3-H100x1", "CANADA-1", 1)
        await client.post("/_sim/faults", json={"kind": "fail_after_accept"})
        response = await create(client)
        assert response.status_code == 200
        seen = await watch(client, fake_clock, response.json()["instances"][0]["id"], "ERROR")
        assert "ACTIVE" not in seen

    async def test_a_deleted_vm_is_deleting_then_gone(
        self, client: httpx.AsyncClient, fake_clock: FakeClock
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0.5})
        await set_stock(client, "n3-H100x1", "CANADA-1", 1)
        vm_id = (await create(client)).json()["instances"][0]["id"]
        await watch(client, fake_clock, vm_id, "ACTIVE")
        deleted = await client.delete(f"/v1/core/virtual-machines/{vm_id}", headers=KEY)
        assert deleted.json() == {"status": True, "message": "Instance is being deleted."}
        assert (await instance(client, vm_id))["status"] == "DELETING"

        async def gone() -> httpx.Response | None:
            got = await client.get(f"/v1/core/virtual-machines/{vm_id}", headers=KEY)
            return got if got.status_code != 200 else None

        got = await eventually(gone, interval=0.02, clock=fake_clock)
        assert (got.status_code, got.json()["error_reason"]) == (404, "not_found")
        assert (
            await client.delete(f"/v1/core/virtual-machines/{vm_id}", headers=KEY)
        ).status_code == 404
        assert (await client.get("/_sim/vms")).json() == []

    async def test_a_vm_being_created_cannot_be_deleted_yet(
        self, client: httpx.AsyncClient, fake_clock: FakeClock
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0.5})
        await set_stock(client, "n3-H100x1", "CANADA-1", 1)
        vm_id = (await create(client)).json()["instances"][0]["id"]
        refused = await client.delete(f"/v1/core/virtual-machines/{vm_id}", headers=KEY)
        assert refused.status_code == 400
        assert "currently being created" in refused.json()["message"]
        assert (await instance(client, vm_id))["status"] in ("CREATING", "BUILD")
        await watch(client, fake_clock, vm_id, "ACTIVE")  # once created, the same delete is taken
        taken = await client.delete(f"/v1/core/virtual-machines/{vm_id}", headers=KEY)
        assert taken.status_code == 200

    async def test_a_refused_delete_fault_refuses_one_delete_of_an_active_vm(
        self, client: httpx.AsyncClient
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0})
        await set_stock(client, "n3-H100x1", "CANADA-1", 1)
        vm_id = (await create(client)).json()["instances"][0]["id"]
        await client.post("/_sim/faults", json={"kind": "delete_refused"})
        first = await client.delete(f"/v1/core/virtual-machines/{vm_id}", headers=KEY)
        second = await client.delete(f"/v1/core/virtual-machines/{vm_id}", headers=KEY)
        assert (first.status_code, second.status_code) == (400, 200)

    async def test_a_vm_hyperstack_ends_is_suspended_and_stops_billing(
        self, client: httpx.AsyncClient
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0})
        await set_stock(client, "n3-H100x1", "CANADA-1", 1)
        vm_id = (await create(client)).json()["instances"][0]["id"]
        ended = await client.post(f"/_sim/vms/{vm_id}/end")
        assert ended.status_code == 200 and ended.json()["status"] == "SUSPENDED"
        shown = await instance(client, vm_id)
        assert (shown["status"], shown["power_state"]) == ("SUSPENDED", "SHUTDOWN")
        money = (await client.get("/_sim/balance")).json()
        assert money["hourly_charge"] == "0"
        assert (await client.post("/_sim/vms/nope/end")).status_code == 404

    async def test_vms_are_listed_searched_and_paged(self, client: httpx.AsyncClient) -> None:
        await set_stock(client, "n3-H100x1", "CANADA-1", 3)
        for name in ("ap-a-1", "ap-a-2", "other"):
            assert (await create(client, name=name)).status_code == 200
        everything = (await client.get("/v1/core/virtual-machines", headers=KEY)).json()
        assert [i["name"] for i in everything["instances"]] == ["ap-a-1", "ap-a-2", "other"]
        assert (everything["count"], everything["page"]) == (3, None)
        found = await client.get(
            "/v1/core/virtual-machines?search=ap-a&page=2&pageSize=1", headers=KEY
        )
        body = found.json()
        assert ([i["name"] for i in body["instances"]], body["count"], body["page_size"]) == (
            ["ap-a-2"],
            2,
            1,
        )
        elsewhere = await client.get(
            "/v1/core/virtual-machines?environment=default-US&exact_environment_match=true",
            headers=KEY,
        )
        assert elsewhere.json()["instances"] == []

    async def test_an_unknown_vm_is_a_404(self, client: httpx.AsyncClient) -> None:
        for vm_id in ("999", "abc"):
            response = await client.get(f"/v1/core/virtual-machines/{vm_id}", headers=KEY)
            assert (response.status_code, response.json()["error_reason"]) == (404, "not_found")


class TestFaults:
    async def test_create_delay_answers_late_with_the_vm_already_made(
        self, client: httpx.AsyncClient
    ) -> None:
        await set_stock(client, "n3-H100x1", "CANADA-1", 1)
        await client.post("/_sim/faults", json={"kind": "create_delay", "seconds": 0.3})
        task = asyncio.create_task(create(client))

        async def vm_made() -> bool:
            return len((await client.get("/_sim/vms")).json()) == 1

        await eventually(vm_made, seconds=0.25)  # well inside the 0.3 s delay
        assert not task.done()  # the VM exists, the answer has not come yet
        assert (await task).status_code == 200

    async def test_create_error_after_commit_makes_the_vm_and_answers_500(
        self, client: httpx.AsyncClient
    ) -> None:
        await set_stock(client, "n3-H100x1", "CANADA-1", 1)
        await client.post("/_sim/faults", json={"kind": "create_error_after_commit"})
        response = await create(client)
        assert response.status_code == 500 and response.json() == {
            "message": "Internal Server Error"
        }
        assert [v["name"] for v in (await client.get("/_sim/vms")).json()] == ["ap-01jd3x-1"]
        assert await outcomes(client) == ["error_after_commit"]

    async def test_capacity_race_answers_409_with_stock_left(
        self, client: httpx.AsyncClient
    ) -> None:
        await set_stock(client, "n3-H100x1", "CANADA-1", 1)
        await client.post("/_sim/faults", json={"kind": "capacity_race"})
        response = await create(client)
        assert (response.status_code, response.json()["error_reason"]) == (409, "conflict")
        assert await stock_of(client, "n3-H100x1", "CANADA-1") == 1
        assert await outcomes(client) == ["capacity_race"]
        assert (await create(client)).status_code == 200

    async def test_create_refused_answers_the_next_create_in_hyperstacks_envelope(
        self, client: httpx.AsyncClient
    ) -> None:
        await set_stock(client, "n3-H100x1", "CANADA-1", 1)
        fault = {"kind": "create_refused", "status": 400, "reason": "bad_request"}
        queued = await client.post("/_sim/faults", json={**fault, "message": "Quota exceeded"})
        assert queued.status_code == 201, queued.text
        refused = await create(client)
        assert (refused.status_code, refused.json()) == (
            400,
            {"status": False, "message": "Quota exceeded", "error_reason": "bad_request"},
        )
        assert (await client.get("/_sim/vms")).json() == []
        assert await stock_of(client, "n3-H100x1", "CANADA-1") == 1
        creates = (await client.get("/_sim/creates")).json()
        assert [(c["outcome"], c["sku"], c["name"]) for c in creates] == [
            ("refused", "n3-H100x1", "ap-01jd3x-1")
        ]
        assert (await create(client)).status_code == 200  # one create only

    async def test_create_refused_without_a_reason_leaves_error_reason_out(
        self, client: httpx.AsyncClient
    ) -> None:
        fault = {"kind": "create_refused", "status": 403, "reason": None, "message": "No"}
        await client.post("/_sim/faults", json=fault)
        refused = await create(client)
        assert (refused.status_code, refused.json()) == (403, {"status": False, "message": "No"})

    async def test_unknown_status_shows_a_status_no_client_knows(
        self, client: httpx.AsyncClient
    ) -> None:
        await set_stock(client, "n3-H100x1", "CANADA-1", 1)
        vm_id = (await create(client)).json()["instances"][0]["id"]
        await client.post("/_sim/faults", json={"kind": "unknown_status"})
        assert (await instance(client, vm_id))["status"] not in {"CREATING", "BUILD", "ACTIVE"}
        assert (await instance(client, vm_id))["status"] == "CREATING"

    async def test_request_faults_answer_in_hyperstack_shapes(
        self, client: httpx.AsyncClient
    ) -> None:
        await client.post("/_sim/faults", json={"kind": "http_500"})
        failed = await client.get("/v1/core/flavors", headers=KEY)
        assert (failed.status_code, failed.json()) == (500, {"message": "Internal Server Error"})
        await client.post("/_sim/faults", json={"kind": "http_429", "seconds": 5})
        limited = await client.get("/v1/core/flavors", headers=KEY)
        assert limited.status_code == 429 and "retry-after" not in limited.headers
        assert limited.json()["status"] is False


class TestRateLimit:
    async def test_500_requests_a_minute_per_ip_then_429_without_retry_after(
        self, client: httpx.AsyncClient, sim: HyperstackSimulator
    ) -> None:
        codes = [
            (await client.get("/v1/core/regions", headers=KEY)).status_code for _ in range(500)
        ]
        assert set(codes) == {200}
        over = await client.get("/v1/pricebook", headers=KEY)
        assert over.status_code == 429 and "retry-after" not in over.headers
        other_ip = httpx.ASGITransport(app=mounted(sim, build_app), client=("192.0.2.7", 5000))
        async with httpx.AsyncClient(transport=other_ip, base_url="http://sim/hyperstack") as c:
            assert (await c.get("/v1/core/regions", headers=KEY)).status_code == 200
