"""The simulated Verda over HTTP: shapes, auth, limits, lifecycle, stock, faults, control API."""

import asyncio
import uuid
from decimal import Decimal
from typing import Any

import httpx
import pytest

from app.core.catalogue import GPU_MODELS
from app.simulators.verda import VerdaSimulator, build_app
from tests.clock import FakeClock
from tests.fixtures.simulators import in_process
from tests.waiting import eventually

IMAGE = "ubuntu-24.04-cuda-12.8-open-docker"
B300 = ("8B300.240V", "FIN-03")


sim, client = in_process(VerdaSimulator, build_app)


async def token_response(client: httpx.AsyncClient, **overrides: str) -> httpx.Response:
    body = {"grant_type": "client_credentials", "client_id": "sim-client"}
    body |= {"client_secret": "sim-secret", **overrides}
    return await client.post("/v1/oauth2/token", json=body)


@pytest.fixture
async def auth(client: httpx.AsyncClient) -> dict[str, str]:
    token = (await token_response(client)).json()["access_token"]
    return {"Authorization": f"Bearer {token}"}


async def set_stock(client: httpx.AsyncClient, sku: str, region: str, quantity: int) -> None:
    response = await client.put(
        "/_sim/stock", json={"sku": sku, "region": region, "quantity": quantity}
    )
    assert response.status_code == 200


def deploy_body(**overrides: Any) -> dict[str, Any]:
    body = {
        "instance_type": B300[0],
        "image": IMAGE,
        "hostname": "ap-01jd3x-1",
        "description": "autoprovision ap-order-01jd3x",
        "location_code": B300[1],
        "pricing": "FIXED_PRICE",
        "tags": [{"key": "autoprovision", "value": "ap-order-01jd3x"}],
    }
    return {**body, **overrides}


async def fault(client: httpx.AsyncClient, kind: str, **extra: Any) -> None:
    assert (await client.post("/_sim/faults", json={"kind": kind, **extra})).status_code == 201


async def stock_of(client: httpx.AsyncClient, sku: str, region: str) -> int:
    catalog = (await client.get("/_sim/catalog")).json()
    return int(next(e["stock"] for e in catalog if (e["sku"], e["region"]) == (sku, region)))


class TestAuth:
    async def test_client_credentials_give_the_five_field_token(
        self, client: httpx.AsyncClient
    ) -> None:
        response = await token_response(client)
        assert response.status_code == 200
        body = response.json()
        assert set(body) == {"access_token", "token_type", "expires_in", "refresh_token", "scope"}
        assert (body["token_type"], body["expires_in"], body["scope"]) == (
            "Bearer",
            3600,
            "cloud-api-v1",
        )

    async def test_wrong_credentials_are_refused_in_verdas_shape(
        self, client: httpx.AsyncClient
    ) -> None:
        response = await token_response(client, client_secret="nope")
        assert response.status_code == 401
        assert response.json() == {
            "code": "unauthorized_request",
            "message": "Invalid client id or client secret",
        }

    async def test_an_unknown_grant_is_a_bad_request(self, client: httpx.AsyncClient) -> None:
        response = await client.post("/v1/oauth2/token", json={"grant_type": "password"})
        assert response.status_code == 400
        assert response.json()["code"] == "invalid_request"

    async def test_a_refresh_token_works_once(self, client: httpx.AsyncClient) -> None:
        refresh = (await token_response(client)).json()["refresh_token"]
        body = {"grant_type": "refresh_token", "refresh_token": refresh}
        first = await client.post("/v1/oauth2/token", json=body)
        assert first.status_code == 200 and first.json()["access_token"]
        again = await client.post("/v1/oauth2/token", json=body)
        assert again.status_code == 401

    @pytest.mark.parametrize(
        "path",
        ["/v1/instance-availability", "/v1/locations", "/v1/images", "/v1/balance",
         "/v1/instances", "/v1/ssh-keys", "/v1/instance-availability/8B300.240V"],
    )  # fmt: skip
    async def test_protected_endpoints_need_a_bearer_token(
        self, client: httpx.AsyncClient, path: str
    ) -> None:
        for headers in ({}, {"Authorization": "Bearer made-up"}):
            response = await client.get(path, headers=headers)
            assert response.status_code == 401
            assert response.json()["code"] == "unauthorized_request"

    async def test_tokens_expire_after_the_configured_lifetime(
        self, client: httpx.AsyncClient
    ) -> None:
        config = await client.put("/_sim/config", json={"token_ttl_seconds": 0.05})
        assert config.json()["token_ttl_seconds"] == 0.05
        body = (await token_response(client)).json()
        headers = {"Authorization": f"Bearer {body['access_token']}"}
        assert body["expires_in"] == 0.05
        assert (await client.get("/v1/balance", headers=headers)).status_code == 200

        async def refused() -> bool:  # tokens expire on the real clock, not the simulator's
            return (await client.get("/v1/balance", headers=headers)).status_code == 401

        assert await eventually(refused)

    async def test_a_bad_token_lifetime_is_refused(self, client: httpx.AsyncClient) -> None:
        response = await client.put("/_sim/config", json={"token_ttl_seconds": 0})
        assert response.status_code == 422


class TestCatalogue:
    async def test_instance_types_are_public_with_decimal_string_prices(
        self, client: httpx.AsyncClient, sim: VerdaSimulator
    ) -> None:
        response = await client.get("/v1/instance-types", params={"currency": "usd"})
        assert response.status_code == 200
        types = {t["instance_type"]: t for t in response.json()}
        b300 = types["8B300.240V"]
        assert b300["price_per_hour"] == "45.52" and isinstance(b300["spot_price"], str)
        assert (b300["model"], b300["gpu"]["number_of_gpus"], b300["currency"]) == (
            "B300",
            8,
            "usd",
        )
        assert b300["storage"] == {"description": "dynamic"}
        assert types["CPU.4V.16G"]["gpu"]["number_of_gpus"] == 0
        for entry in sim.catalog.values():
            assert Decimal(types[entry.sku]["price_per_hour"]) == entry.price_per_hour
            assert entry.gpu_model in GPU_MODELS

    async def test_the_catalogue_covers_the_gpus_counts_and_regions_the_product_is_about(
        self, sim: VerdaSimulator
    ) -> None:
        entries = list(sim.catalog.values())
        models = {e.gpu_model for e in entries}
        assert {"B300", "B200", "H200", "H100", "A100-80G", "L40S", "RTX-PRO-6000"} <= models
        assert {"RTX-A6000"} <= models
        assert {e.gpu_count for e in entries if e.gpu_model == "B300"} == {1, 2, 4, 8}
        assert len({e.region for e in entries}) >= 2
        price = {e.sku: e.price_per_hour for e in entries}
        assert Decimal(40) <= price["8B300.240V"] <= Decimal(50)
        assert Decimal(25) <= price["8H200.141S.176V"] <= Decimal(30)
        assert Decimal(18) <= price["8H100.80S.176V"] <= Decimal(24)
        assert Decimal(2) <= price["1H100.80S.30V"] <= Decimal(3)

    async def test_availability_shows_presence_per_location(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B300, 3)
        listed = (await client.get("/v1/instance-availability", headers=auth)).json()
        by_location = {loc["location_code"]: loc["availabilities"] for loc in listed}
        assert set(by_location) == {"FIN-01", "FIN-02", "FIN-03", "ICE-01"}
        assert by_location["FIN-03"] == ["8B300.240V"]
        assert "8B300.240V" not in by_location["ICE-01"]
        path = "/v1/instance-availability"
        one = await client.get(path, params={"location_code": "FIN-03"}, headers=auth)
        assert one.json() == [{"location_code": "FIN-03", "availabilities": ["8B300.240V"]}]
        spot = await client.get(path, params={"isSpot": "true"}, headers=auth)
        assert all(loc["availabilities"] == [] for loc in spot.json())
        bad = await client.get(path, params={"is_spot": "yes"}, headers=auth)
        assert bad.status_code == 400

    async def test_availability_of_one_type_is_a_bare_boolean(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B300, 1)
        path = "/v1/instance-availability/8B300.240V"
        assert (await client.get(path, headers=auth)).text == "true"
        elsewhere = await client.get(path, params={"location_code": "ICE-01"}, headers=auth)
        assert elsewhere.text == "false"
        none = await client.get("/v1/instance-availability/8H100.80S.176V", headers=auth)
        assert none.json() is False

    async def test_locations_and_images(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        locations = (await client.get("/v1/locations", headers=auth)).json()
        assert {"code": "FIN-01", "name": "Finland 1", "country_code": "FI"} in locations
        images = (await client.get("/v1/images", headers=auth)).json()
        default = next(i for i in images if i["is_default"])
        assert default["image_type"] == IMAGE
        assert {"id", "image_type", "name", "details", "category", "is_cluster"} <= set(default)


class TestSSHKeys:
    @pytest.mark.parametrize("path", ["/v1/ssh-keys", "/v1/sshkeys"])
    async def test_a_key_is_registered_and_listed(
        self, client: httpx.AsyncClient, auth: dict[str, str], path: str
    ) -> None:
        key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHh0ZXN0a2V5 me@laptop"
        created = await client.post(path, json={"name": "laptop", "key": key}, headers=auth)
        assert created.status_code == 201
        key_id = created.text
        assert uuid.UUID(key_id)
        listed = (await client.get(path, headers=auth)).json()
        assert [(k["id"], k["name"], k["key"]) for k in listed] == [(key_id, "laptop", key)]
        one = (await client.get(f"{path}/{key_id}", headers=auth)).json()
        assert one[0]["id"] == key_id

    async def test_a_key_that_is_not_a_key_is_refused(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        response = await client.post(
            "/v1/ssh-keys", json={"name": "x", "key": "hello"}, headers=auth
        )
        assert response.status_code == 400 and response.json()["code"] == "invalid_request"


class TestCreate:
    async def test_a_create_answers_202_with_the_bare_id_and_takes_one_from_stock(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B300, 2)
        response = await client.post("/v1/instances", json=deploy_body(), headers=auth)
        assert response.status_code == 202
        vm_id = response.text
        assert str(uuid.UUID(vm_id)) == vm_id
        assert await stock_of(client, *B300) == 1
        instance = (await client.get(f"/v1/instances/{vm_id}", headers=auth)).json()
        assert (instance["id"], instance["hostname"], instance["location"]) == (
            vm_id,
            "ap-01jd3x-1",
            "FIN-03",
        )
        assert instance["instance_type"] == "8B300.240V" and instance["price_per_hour"] == 45.52
        assert instance["status"] == "ordered" and instance["ip"] is None
        assert instance["tags"][0]["key"] == "autoprovision"
        assert instance["tags"][0]["id"].startswith("tag_")
        assert instance["description"] == "autoprovision ap-order-01jd3x"

    @pytest.mark.parametrize("pricing", [None, "DYNAMIC_PRICE"])
    async def test_every_create_is_billed_the_fixed_price(
        self, client: httpx.AsyncClient, auth: dict[str, str], pricing: str | None
    ) -> None:
        """ "DYNAMIC_PRICE is removed. Only FIXED_PRICE is supported now" (Verda's document)."""
        await set_stock(client, *B300, 1)
        body = {k: v for k, v in deploy_body().items() if k != "pricing"}
        if pricing is not None:
            body["pricing"] = pricing
        vm_id = (await client.post("/v1/instances", json=body, headers=auth)).text
        instance = (await client.get(f"/v1/instances/{vm_id}", headers=auth)).json()
        assert (instance["pricing"], instance["price_per_hour"]) == ("FIXED_PRICE", 45.52)
        (vm,) = (await client.get("/_sim/vms")).json()
        assert vm["price_per_hour"] == "45.52"

    async def test_no_stock_is_verdas_capacity_error(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B300, 1)
        first = await client.post("/v1/instances", json=deploy_body(), headers=auth)
        assert first.status_code == 202
        second = await client.post("/v1/instances", json=deploy_body(), headers=auth)
        assert second.status_code == 503
        assert second.json() == {"code": "service_unavailable", "message": "No capacity available"}
        assert await stock_of(client, *B300) == 0

    @pytest.mark.parametrize("field", ["instance_type", "image", "hostname", "location_code"])
    async def test_each_required_field_is_required(
        self, client: httpx.AsyncClient, auth: dict[str, str], field: str
    ) -> None:
        await set_stock(client, *B300, 1)
        body = deploy_body()
        del body[field]
        response = await client.post("/v1/instances", json=body, headers=auth)
        assert response.status_code == 400 and response.json()["code"] == "invalid_request"
        assert await stock_of(client, *B300) == 1

    @pytest.mark.parametrize(
        "overrides",
        [{"instance_type": "9Z999.1V"}, {"image": "windows-95"}, {"location_code": "MARS-01"},
         {"ssh_key_ids": [str(uuid.uuid4())]}, {"tags": [{"key": f"k{i}"} for i in range(11)]}],
    )  # fmt: skip
    async def test_unknown_names_are_refused(
        self, client: httpx.AsyncClient, auth: dict[str, str], overrides: dict[str, Any]
    ) -> None:
        await set_stock(client, *B300, 1)
        response = await client.post("/v1/instances", json=deploy_body(**overrides), headers=auth)
        assert response.status_code == 400 and response.json()["code"] == "invalid_request"

    async def test_a_balance_below_one_hour_is_insufficient_funds(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B300, 1)
        await client.put("/_sim/config", json={"balance": "45.51"})
        response = await client.post("/v1/instances", json=deploy_body(), headers=auth)
        assert response.status_code == 402 and response.json()["code"] == "insufficient_funds"
        assert await stock_of(client, *B300) == 1

    async def test_balance_is_a_number_in_usd(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await client.put("/_sim/config", json={"balance": "50.5"})
        response = await client.get("/v1/balance", headers=auth)
        assert response.json() == {"amount": 50.5, "currency": "usd"}


class TestLifecycle:
    async def create(self, client: httpx.AsyncClient, auth: dict[str, str], **body: Any) -> str:
        await set_stock(client, *B300, 1)
        response = await client.post("/v1/instances", json=deploy_body(**body), headers=auth)
        assert response.status_code == 202
        return response.text

    async def status(self, client: httpx.AsyncClient, auth: dict[str, str], vm_id: str) -> str:
        response = await client.get(f"/v1/instances/{vm_id}", headers=auth)
        status: str = response.json()["status"]
        return status

    async def test_ordered_then_provisioning_then_running_with_an_ip(
        self, client: httpx.AsyncClient, auth: dict[str, str], fake_clock: FakeClock
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0.3})
        vm_id = await self.create(client, auth)
        seen: list[str] = []

        async def running() -> bool:
            instance = (await client.get(f"/v1/instances/{vm_id}", headers=auth)).json()
            if not seen or seen[-1] != instance["status"]:
                seen.append(instance["status"])
            assert (instance["ip"] is not None) == (instance["status"] == "running")
            return bool(instance["status"] == "running")

        await eventually(running, clock=fake_clock)
        assert seen == ["ordered", "provisioning", "running"]

    async def test_fail_after_accept_ends_in_error(
        self, client: httpx.AsyncClient, auth: dict[str, str], fake_clock: FakeClock
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0.2})
        await fault(client, "fail_after_accept")
        vm_id = await self.create(client, auth)

        async def failed() -> bool:
            return await self.status(client, auth, vm_id) == "error"

        await eventually(failed, clock=fake_clock)
        fake_clock.advance(0.25)  # past the boot: still in error
        assert await self.status(client, auth, vm_id) == "error"

    async def test_delete_goes_deleting_then_discontinued_and_leaves_the_list(
        self, client: httpx.AsyncClient, auth: dict[str, str], fake_clock: FakeClock
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0.05})
        vm_id = await self.create(client, auth)
        fake_clock.advance(0.06)  # booted
        body = {"action": "delete", "id": [vm_id], "delete_permanently": True}
        deleted = await client.put("/v1/instances", json=body, headers=auth)
        assert deleted.status_code == 202
        assert deleted.json() == [{"instanceId": vm_id, "action": "delete", "status": "success"}]
        assert await self.status(client, auth, vm_id) == "deleting"
        assert (await client.put("/v1/instances", json=body, headers=auth)).status_code == 204

        async def discontinued() -> bool:
            return await self.status(client, auth, vm_id) == "discontinued"

        await eventually(discontinued, clock=fake_clock)
        assert (await client.get("/v1/instances", headers=auth)).json() == []
        again = await client.put("/v1/instances", json=body, headers=auth)
        assert again.status_code == 403
        assert again.json() == {
            "code": "forbidden_action",
            "message": "Can't discontinue a discontinued instance",
        }

    async def test_a_provisioning_instance_cannot_be_deleted(
        self, client: httpx.AsyncClient, auth: dict[str, str], fake_clock: FakeClock
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 1.0})
        vm_id = await self.create(client, auth)
        fake_clock.advance(0.25)  # past "ordered", far from running
        assert await self.status(client, auth, vm_id) == "provisioning"
        body = {"action": "delete", "id": vm_id}
        response = await client.put("/v1/instances", json=body, headers=auth)
        assert response.status_code == 403
        assert response.json() == {
            "code": "forbidden_action",
            "message": "Can't discontinue a provisioning instance",
        }

    async def test_an_ordered_instance_is_refused_in_the_provisioning_words(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 60})
        vm_id = await self.create(client, auth)
        assert await self.status(client, auth, vm_id) == "ordered"
        body = {"action": "delete", "id": vm_id}
        response = await client.put("/v1/instances", json=body, headers=auth)
        assert response.status_code == 403
        assert response.json()["message"] == "Can't discontinue a provisioning instance"

    @pytest.mark.parametrize(
        ("volume_ids", "permanently", "left"),
        [
            (None, True, "trash"),  # `delete_permanently` does nothing without volume_ids
            (None, False, "trash"),
            ([], True, "detached"),
            (["other"], True, "detached"),
            ("os", False, "trash"),
            ("os", True, "deleted"),  # the one way nothing of it bills on
        ],
    )
    async def test_what_a_delete_leaves_of_the_os_volume(
        self,
        client: httpx.AsyncClient,
        auth: dict[str, str],
        volume_ids: Any,
        permanently: bool,
        left: str,
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0})
        vm_id = await self.create(client, auth)
        os_volume = (await client.get(f"/v1/instances/{vm_id}", headers=auth)).json()[
            "os_volume_id"
        ]
        body: dict[str, Any] = {"action": "delete", "id": vm_id}
        body["delete_permanently"] = permanently
        if volume_ids is not None:
            body["volume_ids"] = [os_volume] if volume_ids == "os" else volume_ids
        assert (await client.put("/v1/instances", json=body, headers=auth)).status_code == 202
        (vm,) = (await client.get("/_sim/vms")).json()
        assert vm["os_volume_status"] == left
        (volume,) = (await client.get("/_sim/volumes")).json()
        assert (volume["id"], volume["status"]) == (os_volume, left)
        assert (volume["hourly_price"] == "0") is (left == "deleted")
        listed = {v["id"] for v in (await client.get("/v1/volumes", headers=auth)).json()}
        trash = {v["id"] for v in (await client.get("/v1/volumes/trash", headers=auth)).json()}
        assert (os_volume in listed, os_volume in trash) == (left == "detached", left == "trash")

    async def test_a_refused_delete_fault_refuses_a_running_instance_once(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0})
        vm_id = await self.create(client, auth)
        await fault(client, "delete_refused")
        body = {"action": "delete", "id": vm_id}
        first = await client.put("/v1/instances", json=body, headers=auth)
        assert first.status_code == 403 and first.json()["code"] == "forbidden_action"
        assert first.json()["message"] == "Can't discontinue a provisioning instance"
        assert (await client.put("/v1/instances", json=body, headers=auth)).status_code == 202

    async def test_an_instance_verda_ends_is_discontinued_and_leaves_the_list(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0})
        vm_id = await self.create(client, auth)
        ended = await client.post(f"/_sim/vms/{vm_id}/end")
        assert ended.json()["status"] == "discontinued"
        assert await self.status(client, auth, vm_id) == "discontinued"
        assert (await client.get("/v1/instances", headers=auth)).json() == []
        # Its OS volume is left detached, billing (what Verda does is not documented).
        (volume,) = (await client.get("/_sim/volumes")).json()
        assert volume["status"] == "detached"
        hourly = (await client.get("/_sim/balance")).json()["hourly_charge"]
        assert hourly == volume["hourly_price"]

    async def test_unknown_ids_are_invalid_instance_ids(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        missing = str(uuid.uuid4())
        got = await client.get(f"/v1/instances/{missing}", headers=auth)
        assert got.status_code == 404 and got.json()["message"] == "Invalid instance id"
        body = {"action": "delete", "id": [missing]}
        acted = await client.put("/v1/instances", json=body, headers=auth)
        assert acted.status_code == 404 and acted.json()["message"] == "Invalid instance id"

    async def test_several_ids_with_a_failure_answer_207_per_item(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0})
        vm_id = await self.create(client, auth)
        missing = str(uuid.uuid4())
        body = {"action": "delete", "id": [vm_id, missing]}
        response = await client.put("/v1/instances", json=body, headers=auth)
        assert response.status_code == 207
        assert response.json() == [
            {"instanceId": vm_id, "action": "delete", "status": "success"},
            {"instanceId": missing, "action": "delete", "status": "error",
             "error": "Invalid instance id", "statusCode": 404},
        ]  # fmt: skip

    async def test_shutdown_and_start(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0})
        vm_id = await self.create(client, auth)
        for action, status in (("shutdown", "offline"), ("start", "running")):
            body = {"action": action, "id": vm_id}
            assert (await client.put("/v1/instances", json=body, headers=auth)).status_code == 202
            assert await self.status(client, auth, vm_id) == status

    async def test_the_list_filters_by_tag_status_and_id(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        first = await self.create(client, auth)
        other_tags = [{"key": "Team", "value": "ml"}, {"key": "autoprovision", "value": "other"}]
        second = await self.create(client, auth, tags=other_tags)

        async def ids(**params: Any) -> list[str]:
            listed = await client.get("/v1/instances", params=params, headers=auth)
            return [i["id"] for i in listed.json()]

        assert await ids() == [first, second]
        assert await ids(tag="autoprovision=ap-order-01jd3x") == [first]
        assert await ids(tag="autoprovision") == [first, second]
        assert await ids(tag=["team", "autoprovision=other"]) == [second]
        assert await ids(tag="team=nlp") == []
        assert await ids(status="ordered", computeId=second) == [second]
        assert await ids(status="running") == []


class TestRateLimits:
    async def test_sixty_per_minute_per_method_and_path(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        codes = [(await client.get("/v1/balance", headers=auth)).status_code for _ in range(61)]
        assert codes == [200] * 60 + [429]
        limited = await client.get("/v1/balance", headers=auth)
        assert limited.json()["code"] == "rate_limit_exceeded"
        assert 55 <= int(limited.headers["retry-after"]) <= 60
        assert limited.headers["ratelimit-policy"] == ('"project";q=500;w=60, "endpoint";q=60;w=60')
        assert '"endpoint";r=0' in limited.headers["ratelimit"]
        assert (await client.get("/v1/locations", headers=auth)).status_code == 200

    async def test_the_instance_list_allows_120(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        codes = [(await client.get("/v1/instances", headers=auth)).status_code for _ in range(121)]
        assert codes == [200] * 120 + [429]

    async def test_500_per_minute_per_project_across_paths(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        paths = [f"/v1/instances/{uuid.uuid4()}" for _ in range(501)]
        codes = [(await client.get(p, headers=auth)).status_code for p in paths]
        assert codes == [404] * 500 + [429]

    async def test_public_and_unauthenticated_calls_are_not_counted(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        for _ in range(61):
            assert (await client.get("/v1/instance-types")).status_code == 200
        assert (await client.get("/v1/balance", headers=auth)).status_code == 200


class TestFaults:
    async def test_create_delay_answers_late_with_the_vm_already_made(
        self, client: httpx.AsyncClient, auth: dict[str, str], sim: VerdaSimulator
    ) -> None:
        await set_stock(client, *B300, 1)
        await fault(client, "create_delay", seconds=0.2)
        task = asyncio.create_task(client.post("/v1/instances", json=deploy_body(), headers=auth))

        async def made() -> bool:
            return len(sim.vms) == 1

        await eventually(made)
        assert not task.done()
        response = await task
        assert response.status_code == 202 and response.text in sim.vms

    async def test_create_error_after_commit_makes_the_vm_and_answers_500(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B300, 1)
        await fault(client, "create_error_after_commit")
        response = await client.post("/v1/instances", json=deploy_body(), headers=auth)
        assert response.status_code == 500 and response.json()["code"] == "server_error"
        listed = (await client.get("/v1/instances", headers=auth)).json()
        assert [i["hostname"] for i in listed] == ["ap-01jd3x-1"]
        assert await stock_of(client, *B300) == 0

    async def test_capacity_race_refuses_although_stock_is_shown(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B300, 1)
        await fault(client, "capacity_race")
        response = await client.post("/v1/instances", json=deploy_body(), headers=auth)
        assert response.status_code == 503 and response.json()["code"] == "service_unavailable"
        assert await stock_of(client, *B300) == 1
        retry = await client.post("/v1/instances", json=deploy_body(), headers=auth)
        assert retry.status_code == 202

    async def test_create_refused_answers_the_next_create_in_verdas_envelope(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B300, 1)
        reason, message = "forbidden_action", "Project quota reached"
        await fault(client, "create_refused", status=403, reason=reason, message=message)
        response = await client.post("/v1/instances", json=deploy_body(), headers=auth)
        assert (response.status_code, response.json()) == (
            403,
            {"code": "forbidden_action", "message": "Project quota reached"},
        )
        assert await stock_of(client, *B300) == 1
        creates = (await client.get("/_sim/creates")).json()
        assert [(c["outcome"], c["kind"], c["sku"]) for c in creates] == [
            ("refused", "instance", B300[0])
        ]
        retry = await client.post("/v1/instances", json=deploy_body(), headers=auth)
        assert retry.status_code == 202

    async def test_request_faults_use_verdas_error_shapes(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await fault(client, "http_500")
        failed = await client.get("/v1/balance", headers=auth)
        assert failed.status_code == 500 and failed.json()["code"] == "server_error"
        await fault(client, "http_429", seconds=7)
        limited = await client.get("/v1/balance", headers=auth)
        assert limited.status_code == 429 and limited.headers["retry-after"] == "7"

    async def test_unknown_status_shows_a_status_nobody_knows(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B300, 1)
        vm_id = (await client.post("/v1/instances", json=deploy_body(), headers=auth)).text
        await fault(client, "unknown_status")
        odd = (await client.get(f"/v1/instances/{vm_id}", headers=auth)).json()["status"]
        assert odd not in ("ordered", "provisioning", "running")
        assert (await client.get(f"/v1/instances/{vm_id}", headers=auth)).json()["status"] == (
            "ordered"
        )


class TestControlAPI:
    async def test_creates_and_vms_record_every_create_and_its_outcome(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B300, 1)
        await client.post("/v1/instances", json=deploy_body(image="nope"), headers=auth)
        await fault(client, "capacity_race")
        await client.post("/v1/instances", json=deploy_body(), headers=auth)
        created = await client.post("/v1/instances", json=deploy_body(), headers=auth)
        await client.post("/v1/instances", json=deploy_body(), headers=auth)
        await set_stock(client, *B300, 1)
        await client.put("/_sim/config", json={"balance": "1"})
        await client.post("/v1/instances", json=deploy_body(), headers=auth)
        creates = (await client.get("/_sim/creates")).json()
        assert [c["outcome"] for c in creates] == [
            "rejected", "capacity_race", "created", "no_capacity", "insufficient_funds",
        ]  # fmt: skip
        assert {(c["sku"], c["region"], c["name"]) for c in creates} == {
            ("8B300.240V", "FIN-03", "ap-01jd3x-1")
        }
        assert creates[2]["vm_id"] == created.text
        vms = (await client.get("/_sim/vms")).json()
        assert [(v["id"], v["name"], v["status"], v["tags"]) for v in vms] == [
            (created.text, "ap-01jd3x-1", "ordered", ["autoprovision=ap-order-01jd3x"])
        ]

    async def test_reset_forgets_tokens_and_keys(
        self, client: httpx.AsyncClient, auth: dict[str, str], sim: VerdaSimulator
    ) -> None:
        await client.put("/_sim/config", json={"token_ttl_seconds": 60})
        key = {"name": "k", "key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHh0ZXN0a2V5"}
        assert (await client.post("/v1/ssh-keys", json=key, headers=auth)).status_code == 201
        await client.post("/_sim/reset")
        assert (await client.get("/v1/balance", headers=auth)).status_code == 401
        assert sim.ssh_keys == {}
        assert (await client.get("/_sim/config")).json()["token_ttl_seconds"] == 3600

    async def test_unknown_paths_answer_verdas_404(self, client: httpx.AsyncClient) -> None:
        response = await client.get("/v1/nothing-here")
        assert response.status_code == 404 and response.json()["code"] == "not_found"
