"""The QuantaCloud simulator over HTTP: the wire format of the reference notes, and `/_sim`."""

import base64
import hashlib
import time
from typing import Any

import httpx
import pytest

from app.simulators.quantacloud import QuantaCloudSimulator, build_app
from tests.clock import FakeClock
from tests.fixtures.simulators import in_process
from tests.waiting import eventually

KEY = {"X-API-Key": "sim-key"}
B300 = ("b300-sxm-x8", "us-east-1")
RTX = ("rtx-pro-6000-blackwell-x1", "us-east-1")
BLOB = base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + bytes(range(32))).decode()
PUBLIC_KEY = f"ssh-ed25519 {BLOB} me@laptop"
OTHER_BLOB = base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + bytes(range(32, 64))).decode()
OTHER_KEY = f"ssh-ed25519 {OTHER_BLOB} someone-else"


sim, client = in_process(QuantaCloudSimulator, build_app)


async def stock(client: httpx.AsyncClient, kind: tuple[str, str], quantity: int) -> None:
    sku, region = kind
    response = await client.put(
        "/_sim/stock", json={"sku": sku, "region": region, "quantity": quantity}
    )
    assert response.status_code == 200, response.text


async def offers(client: httpx.AsyncClient, **params: int) -> dict[str, Any]:
    response = await client.get("/api/v1/offers", params=params)
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


async def offer_id(client: httpx.AsyncClient, kind: tuple[str, str]) -> str:
    sku, region = kind
    for offer in (await offers(client, size=100))["offers"]:
        if f"{offer['gpu']['slug']}-x{offer['gpuCount']}" == sku and offer["region"] == region:
            return str(offer["id"])
    raise AssertionError(f"{kind} is not offered")


async def deploy(client: httpx.AsyncClient, offer: str, **extra: Any) -> httpx.Response:
    body = {"provider": "quantacloud", "offer_id": offer, **extra}
    return await client.post("/api/v1/deployments", json=body, headers=KEY)


async def deployment(client: httpx.AsyncClient, dep_id: str) -> dict[str, Any]:
    response = await client.get(f"/api/v1/deployments/{dep_id}", headers=KEY)
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


async def wait_for_status(
    client: httpx.AsyncClient, clock: FakeClock, dep_id: str, status: str
) -> dict[str, Any]:
    """Read the deployment as simulated time passes until it shows `status`."""

    async def shown() -> dict[str, Any] | None:
        body = await deployment(client, dep_id)
        return body if body["status"] == status else None

    return await eventually(shown, interval=0.02, clock=clock, what=f"deployment {status}")


async def fault(client: httpx.AsyncClient, kind: str, **extra: Any) -> None:
    response = await client.post("/_sim/faults", json={"kind": kind, **extra})
    assert response.status_code == 201


async def creates(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    body: list[dict[str, Any]] = (await client.get("/_sim/creates")).json()
    return body


class TestOffers:
    async def test_nothing_is_offered_without_stock(self, client: httpx.AsyncClient) -> None:
        assert await offers(client) == {
            "offers": [],
            "page": 0,
            "totalPages": 0,
            "totalElements": 0,
            "hasMore": False,
        }

    async def test_an_offer_has_the_shape_of_the_live_capture(
        self, client: httpx.AsyncClient
    ) -> None:
        await stock(client, RTX, 2)
        (offer,) = (await offers(client))["offers"]
        assert offer == {
            "id": offer["id"],
            "provider": {"name": "QuantaCloud", "slug": "quantacloud", "maintenance": False},
            "gpu": {
                "name": "NVIDIA RTX PRO 6000 Blackwell",
                "slug": "rtx-pro-6000-blackwell",
                "vramGB": 96,
                "architecture": "Blackwell",
            },
            "gpuCount": 1,
            "region": "us-east-1",
            "regionInfo": {
                "countryCode": "US",
                "countryName": "United States",
                "cityState": "Virginia",
                "continent": "North America",
            },
            "priceHourly": 2.39,
            "pricePerGpu": 2.39,
            "isAvailable": True,
            "specs": {"vcpu": 16, "ram": 144, "disk": 725},
            "storageCostPerGB": 0.0,
            "storageMinGB": 725,
            "storageMaxGB": 725,
            "costDataComplete": True,
            "deploymentType": "virtual",
            "nvlinkEnabled": False,
            "interconnect": None,
        }
        assert len(offer["id"]) == 36  # a UUID

    async def test_an_sxm_box_prices_the_whole_machine_and_has_nvlink(
        self, client: httpx.AsyncClient
    ) -> None:
        await stock(client, B300, 1)
        (offer,) = (await offers(client))["offers"]
        assert (offer["priceHourly"], offer["pricePerGpu"], offer["gpuCount"]) == (45.52, 5.69, 8)
        assert (offer["nvlinkEnabled"], offer["interconnect"]) == (True, "nvlink")
        assert offer["specs"]["disk"] == offer["storageMinGB"] == offer["storageMaxGB"]

    async def test_offers_page_cheapest_per_gpu_first(
        self, client: httpx.AsyncClient, sim: QuantaCloudSimulator
    ) -> None:
        for entry in sim.catalog.values():
            sim.set_stock(entry.sku, entry.region, 1)
        first = await offers(client, page=0, size=30)
        assert (first["totalElements"], first["totalPages"], first["hasMore"]) == (80, 3, True)
        last = await offers(client, page=2, size=30)
        assert (len(last["offers"]), last["hasMore"]) == (20, False)
        everything = (await offers(client, size=100))["offers"]
        per_gpu = [o["pricePerGpu"] for o in everything]
        assert len(everything) == 80 and per_gpu == sorted(per_gpu)
        assert len({o["id"] for o in everything}) == 80

    async def test_bad_paging_is_a_validation_error(self, client: httpx.AsyncClient) -> None:
        response = await client.get("/api/v1/offers", params={"page": "x"})
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "validation_error"

    async def test_an_offer_404s_once_it_is_out_of_stock(self, client: httpx.AsyncClient) -> None:
        await stock(client, RTX, 1)
        offer = await offer_id(client, RTX)
        assert (await client.get(f"/api/v1/offers/{offer}")).json()["id"] == offer
        await stock(client, RTX, 0)
        gone = await client.get(f"/api/v1/offers/{offer}")
        assert gone.status_code == 404
        assert gone.json() == {"error": {"code": "not_found", "message": "Offer not found"}}

    async def test_offer_ids_change_when_stock_comes_back(self, client: httpx.AsyncClient) -> None:
        await stock(client, RTX, 1)
        first = await offer_id(client, RTX)
        await stock(client, RTX, 3)
        assert await offer_id(client, RTX) == first
        await stock(client, RTX, 0)
        await stock(client, RTX, 1)
        second = await offer_id(client, RTX)
        assert second != first
        stale = await deploy(client, first)
        assert stale.status_code == 400
        assert stale.json()["error"]["code"] == "offer_unavailable"

    async def test_gpu_families_count_stock_per_family(self, client: httpx.AsyncClient) -> None:
        await stock(client, RTX, 3)
        families = {f["key"]: f for f in (await client.get("/api/v1/gpu-families")).json()["data"]}
        rtx = families["rtx-pro-6000"]
        assert rtx["availableCount"] == 3 and rtx["cheapestPrice"] == 2.39
        assert "rtx-pro-6000-blackwell-mig-48gb" in rtx["variantSlugs"]
        assert families["b300"]["availableCount"] == 0 and families["b300"]["cheapestPrice"] is None


class TestAuth:
    @pytest.mark.parametrize(
        "path", ["/api/v1/account", "/api/v1/account/balance", "/api/v1/deployments"]
    )
    @pytest.mark.parametrize("headers", [{}, {"X-API-Key": "wrong"}, {"Authorization": "Bearer x"}])
    async def test_a_missing_or_wrong_key_is_refused(
        self, client: httpx.AsyncClient, path: str, headers: dict[str, str]
    ) -> None:
        response = await client.get(path, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"

    async def test_the_key_works_as_x_api_key_or_bearer(self, client: httpx.AsyncClient) -> None:
        assert (await client.get("/api/v1/account", headers=KEY)).json()["email"]
        bearer = await client.get("/api/v1/account", headers={"Authorization": "Bearer sim-key"})
        assert bearer.status_code == 200

    async def test_the_catalogue_is_public(self, client: httpx.AsyncClient) -> None:
        assert (await client.get("/api/v1/offers")).status_code == 200
        assert (await client.get("/api/v1/gpu-families")).status_code == 200

    async def test_balance_is_a_string_with_six_decimals(self, client: httpx.AsyncClient) -> None:
        balance = await client.get("/api/v1/account/balance", headers=KEY)
        assert balance.json() == {"balance": "10000.000000", "currency": "USD"}


class TestSSHKeys:
    async def test_a_key_is_listed_by_fingerprint_without_its_material(
        self, client: httpx.AsyncClient
    ) -> None:
        added = await client.post(
            "/api/v1/users/me/ssh-keys", json={"name": "laptop", "publicKey": PUBLIC_KEY}
        )
        assert added.status_code == 401
        added = await client.post(
            "/api/v1/users/me/ssh-keys",
            json={"name": "laptop", "publicKey": PUBLIC_KEY},
            headers=KEY,
        )
        assert added.status_code == 201
        digest = hashlib.sha256(base64.b64decode(BLOB)).digest()
        expected = "SHA256:" + base64.b64encode(digest).decode().rstrip("=")
        (listed,) = (await client.get("/api/v1/users/me/ssh-keys", headers=KEY)).json()
        assert listed["id"] == added.json()["id"]
        assert (listed["name"], listed["fingerprint"], listed["managed"]) == (
            "laptop",
            expected,
            False,
        )
        assert BLOB not in str(listed)

    async def test_a_key_that_is_not_openssh_is_refused(self, client: httpx.AsyncClient) -> None:
        response = await client.post(
            "/api/v1/users/me/ssh-keys", json={"name": "x", "publicKey": "hello"}, headers=KEY
        )
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "validation_error"

    async def test_a_create_naming_no_keys_gets_every_key_on_the_account(
        self, client: httpx.AsyncClient
    ) -> None:
        keys = {}
        for name, public_key in (("mine", PUBLIC_KEY), ("theirs", OTHER_KEY)):
            added = await client.post(
                "/api/v1/users/me/ssh-keys",
                json={"name": name, "publicKey": public_key},
                headers=KEY,
            )
            keys[name] = added.json()
        await stock(client, RTX, 3)
        unnamed = await deploy(client, await offer_id(client, RTX))
        empty = await deploy(client, await offer_id(client, RTX), ssh_key_ids=[])
        named = await deploy(client, await offer_id(client, RTX), ssh_key_ids=[keys["mine"]["id"]])
        on_vm = {vm["id"]: vm["ssh_keys"] for vm in (await client.get("/_sim/vms")).json()}
        every_key = [keys["mine"]["fingerprint"], keys["theirs"]["fingerprint"]]
        assert on_vm[unnamed.json()["id"]] == on_vm[empty.json()["id"]] == every_key
        assert on_vm[named.json()["id"]] == [keys["mine"]["fingerprint"]]

    async def test_a_key_added_later_never_reaches_a_vm(self, client: httpx.AsyncClient) -> None:
        await stock(client, RTX, 1)
        made = await deploy(client, await offer_id(client, RTX))
        await client.post(
            "/api/v1/users/me/ssh-keys", json={"name": "k", "publicKey": PUBLIC_KEY}, headers=KEY
        )
        (vm,) = (await client.get("/_sim/vms")).json()
        assert (vm["id"], vm["ssh_keys"]) == (made.json()["id"], [])


class TestCreate:
    async def test_a_create_answers_202_and_takes_one_from_stock(
        self, client: httpx.AsyncClient
    ) -> None:
        await stock(client, B300, 2)
        response = await deploy(client, await offer_id(client, B300))
        assert response.status_code == 202
        body = response.json()
        assert body["status"] == "provisioning" and body["id"].startswith("dep_")
        catalog = {(e["sku"], e["region"]): e for e in (await client.get("/_sim/catalog")).json()}
        assert catalog[B300]["stock"] == 1
        (record,) = await creates(client)
        assert (record["sku"], record["region"], record["outcome"], record["vm_id"]) == (
            *B300,
            "created",
            body["id"],
        )
        (vm,) = (await client.get("/_sim/vms")).json()
        assert (vm["id"], vm["status"], vm["name"]) == (body["id"], "provisioning", None)

    async def test_the_first_hour_is_charged(self, client: httpx.AsyncClient) -> None:
        await stock(client, B300, 1)
        await deploy(client, await offer_id(client, B300))
        balance = (await client.get("/api/v1/account/balance", headers=KEY)).json()
        assert balance["balance"] == "9954.480000"

    async def test_the_last_unit_takes_the_offer_away_and_cools_it_down(
        self, client: httpx.AsyncClient
    ) -> None:
        await stock(client, B300, 1)
        offer = await offer_id(client, B300)
        assert (await deploy(client, offer)).status_code == 202
        assert (await offers(client))["offers"] == []
        sold_out = await deploy(client, offer)
        assert sold_out.status_code == 400
        assert sold_out.json() == {
            "error": {"code": "offer_unavailable", "message": "Offer is no longer available."}
        }
        await stock(client, B300, 1)
        cooling = await deploy(client, await offer_id(client, B300))
        assert cooling.status_code == 503
        error = cooling.json()["error"]
        assert error["code"] == "offer_cooling_down" and 0 < error["retry_after"] <= 5
        assert [c["outcome"] for c in await creates(client)] == [
            "created",
            "no_capacity",
            "no_capacity",
        ]

    async def test_the_cool_down_passes(
        self, client: httpx.AsyncClient, sim: QuantaCloudSimulator
    ) -> None:
        await client.put("/_sim/config", json={"cooldown_seconds": 0.05})
        await stock(client, B300, 1)
        await fault(client, "capacity_race")
        offer = await offer_id(client, B300)
        assert (await deploy(client, offer)).status_code == 400
        assert (await deploy(client, offer)).status_code == 503

        async def cooled() -> bool:  # cool-downs run on the real clock, not the simulator's
            return sim.cooling_for(B300) is None

        await eventually(cooled)
        assert (await deploy(client, offer)).status_code == 202

    async def test_insufficient_balance_is_402_with_both_amounts(
        self, client: httpx.AsyncClient
    ) -> None:
        await client.put("/_sim/config", json={"balance": "1"})
        await stock(client, RTX, 1)
        response = await deploy(client, await offer_id(client, RTX))
        assert response.status_code == 402
        assert response.json() == {
            "error": {
                "code": "insufficient_balance",
                "message": "Insufficient balance. Required: $2.39, available: $1",
                "required_balance": "2.39",
                "current_balance": "1.000000",
            }
        }
        assert (await creates(client))[0]["outcome"] == "insufficient_funds"
        assert await offer_id(client, RTX)  # still in stock

    @pytest.mark.parametrize(
        ("body", "code"),
        [
            ({"provider": "lambda"}, "provider_not_found"),
            ({"offer_id": ""}, "validation_error"),
            ({"ssh_key_ids": ["key_nope"]}, "validation_error"),
            ({"ssh_key_ids": [{"id": "key_nope"}]}, "validation_error"),
        ],
    )
    async def test_a_wrong_request_is_refused(
        self, client: httpx.AsyncClient, body: dict[str, Any], code: str
    ) -> None:
        await stock(client, RTX, 1)
        offer = await offer_id(client, RTX)
        response = await client.post(
            "/api/v1/deployments",
            json={"provider": "quantacloud", "offer_id": offer, **body},
            headers=KEY,
        )
        assert response.status_code == 400 and response.json()["error"]["code"] == code
        assert (await creates(client))[0]["outcome"] == "rejected"

    async def test_a_create_without_the_key_is_401(self, client: httpx.AsyncClient) -> None:
        await stock(client, RTX, 1)
        offer = await offer_id(client, RTX)
        response = await client.post(
            "/api/v1/deployments", json={"provider": "quantacloud", "offer_id": offer}
        )
        assert response.status_code == 401 and await creates(client) == []


class TestCreateFaults:
    async def test_create_delay_answers_late_with_the_vm_already_made(
        self, client: httpx.AsyncClient
    ) -> None:
        await stock(client, RTX, 1)
        offer = await offer_id(client, RTX)
        await fault(client, "create_delay", seconds=0.2)
        started = time.monotonic()
        response = await deploy(client, offer)
        assert response.status_code == 202 and time.monotonic() - started >= 0.2

    async def test_create_error_after_commit_makes_the_vm_and_answers_500(
        self, client: httpx.AsyncClient
    ) -> None:
        await stock(client, RTX, 1)
        await fault(client, "create_error_after_commit")
        response = await deploy(client, await offer_id(client, RTX))
        assert response.status_code == 500
        assert response.json()["error"]["code"] == "internal_error"
        (record,) = await creates(client)
        (vm,) = (await client.get("/_sim/vms")).json()
        assert (record["outcome"], record["vm_id"]) == ("error_after_commit", vm["id"])

    async def test_capacity_race_refuses_although_stock_is_shown(
        self, client: httpx.AsyncClient
    ) -> None:
        await stock(client, RTX, 1)
        await fault(client, "capacity_race")
        response = await deploy(client, await offer_id(client, RTX))
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "offer_unavailable"
        assert len((await offers(client))["offers"]) == 1
        assert [c["outcome"] for c in await creates(client)] == ["capacity_race"]
        assert (await client.get("/_sim/vms")).json() == []

    async def test_create_refused_answers_the_next_create_in_quantaclouds_envelope(
        self, client: httpx.AsyncClient
    ) -> None:
        await stock(client, RTX, 1)
        await fault(client, "create_refused", status=400, reason="quota_exceeded", message="Nope")
        response = await deploy(client, await offer_id(client, RTX))
        assert (response.status_code, response.json()) == (
            400,
            {"error": {"code": "quota_exceeded", "message": "Nope"}},
        )
        assert [(c["outcome"], c["sku"]) for c in await creates(client)] == [
            ("refused", "rtx-pro-6000-blackwell-x1")
        ]
        assert (await client.get("/_sim/vms")).json() == []
        assert (await deploy(client, await offer_id(client, RTX))).status_code == 202


class TestLifecycle:
    async def test_a_deployment_boots_and_gets_its_connection_once_active(
        self, client: httpx.AsyncClient, fake_clock: FakeClock
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0.2})
        await stock(client, B300, 1)
        offer = await offer_id(client, B300)
        dep_id = (await deploy(client, offer)).json()["id"]
        booting = await deployment(client, dep_id)
        assert booting["status"] == "provisioning" and booting["connection"] is None
        assert (booting["offerId"], booting["gpu"], booting["gpuCount"], booting["region"]) == (
            offer,
            {"slug": "b300-sxm", "name": "NVIDIA B300"},
            8,
            "us-east-1",
        )
        assert booting["createdAt"].endswith("Z") and booting["priceHourly"] == 45.52
        assert (await wait_for_status(client, fake_clock, dep_id, "connecting"))[
            "connection"
        ] is None
        active = await wait_for_status(client, fake_clock, dep_id, "active")
        assert active["status"] == "active" and active["failure_code"] is None
        assert active["connection"]["ssh_port"] == 22 and active["connection"]["public_ip"]

    async def test_fail_after_accept_ends_failed_with_a_code(
        self, client: httpx.AsyncClient, fake_clock: FakeClock
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0.2})
        await stock(client, RTX, 1)
        await fault(client, "fail_after_accept")
        dep_id = (await deploy(client, await offer_id(client, RTX))).json()["id"]
        failed = await wait_for_status(client, fake_clock, dep_id, "failed")
        assert failed["status"] == "failed" and failed["failure_code"]
        assert failed["connection"] is None

    async def test_stop_walks_to_terminated_and_a_second_stop_cannot(
        self, client: httpx.AsyncClient, fake_clock: FakeClock
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0.2})
        await stock(client, RTX, 1)
        dep_id = (await deploy(client, await offer_id(client, RTX))).json()["id"]
        stopped = await client.post(f"/api/v1/deployments/{dep_id}/stop", headers=KEY)
        assert stopped.status_code == 202 and stopped.json()["status"] == "stopping"
        again = await client.post(f"/api/v1/deployments/{dep_id}/stop", headers=KEY)
        assert again.status_code == 400 and again.json()["error"]["code"] == "validation_error"
        assert (await wait_for_status(client, fake_clock, dep_id, "terminated"))[
            "status"
        ] == "terminated"

    async def test_a_refused_stop_fault_refuses_one_stop(self, client: httpx.AsyncClient) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0})
        await stock(client, RTX, 1)
        dep_id = (await deploy(client, await offer_id(client, RTX))).json()["id"]
        await fault(client, "delete_refused")
        refused = await client.post(f"/api/v1/deployments/{dep_id}/stop", headers=KEY)
        assert (
            refused.status_code == 400 and (await deployment(client, dep_id))["status"] == "active"
        )
        taken = await client.post(f"/api/v1/deployments/{dep_id}/stop", headers=KEY)
        assert taken.status_code == 202

    async def test_a_deployment_quantacloud_ends_is_interrupted_and_stops_billing(
        self, client: httpx.AsyncClient
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0})
        await stock(client, RTX, 1)
        dep_id = (await deploy(client, await offer_id(client, RTX))).json()["id"]
        ended = await client.post(f"/_sim/vms/{dep_id}/end")
        assert ended.json()["status"] == "interrupted"
        assert (await deployment(client, dep_id))["status"] == "interrupted"
        assert (await client.get("/_sim/balance")).json()["hourly_charge"] == "0"

    async def test_unknown_deployments_are_404(self, client: httpx.AsyncClient) -> None:
        for response in (
            await client.get("/api/v1/deployments/dep_nope", headers=KEY),
            await client.post("/api/v1/deployments/dep_nope/stop", headers=KEY),
        ):
            assert response.status_code == 404
            assert response.json()["error"] == {
                "code": "not_found",
                "message": "Deployment not found",
            }

    async def test_the_list_is_newest_first_and_keeps_terminated(
        self, client: httpx.AsyncClient, sim: QuantaCloudSimulator
    ) -> None:
        await client.put("/_sim/config", json={"boot_seconds": 0})
        await stock(client, RTX, 3)
        ids = [(await deploy(client, await offer_id(client, RTX))).json()["id"] for _ in range(3)]
        for offset, dep_id in enumerate(ids):
            sim.vms[dep_id].created_at += offset  # distinct times, oldest first
        await client.post(f"/api/v1/deployments/{ids[0]}/stop", headers=KEY)
        listed = (await client.get("/api/v1/deployments", headers=KEY)).json()
        assert [d["id"] for d in listed["data"]] == ids[::-1]
        assert listed["data"][-1]["status"] == "terminated"
        second = (await client.get("/api/v1/deployments?page=1&size=2", headers=KEY)).json()
        assert [d["id"] for d in second["data"]] == [ids[0]] and second["hasMore"] is False

    async def test_unknown_status_is_served_once(self, client: httpx.AsyncClient) -> None:
        await stock(client, RTX, 1)
        dep_id = (await deploy(client, await offer_id(client, RTX))).json()["id"]
        await fault(client, "unknown_status")
        assert (await deployment(client, dep_id))["status"] == "reticulating_splines"
        assert (await deployment(client, dep_id))["status"] == "provisioning"

    async def test_the_proposed_fields_can_be_switched_off(self, client: httpx.AsyncClient) -> None:
        await client.put("/_sim/config", json={"deployment_details": False})
        assert (await client.get("/_sim/config")).json()["deployment_details"] is False
        await stock(client, RTX, 1)
        dep_id = (await deploy(client, await offer_id(client, RTX))).json()["id"]
        assert set(await deployment(client, dep_id)) == {
            "id",
            "status",
            "failure_code",
            "connection",
        }


class TestErrorsAndLimits:
    async def test_request_faults_use_quantacloud_error_bodies(
        self, client: httpx.AsyncClient
    ) -> None:
        await fault(client, "http_500")
        failed = await client.get("/api/v1/offers")
        assert failed.status_code == 500
        assert failed.json()["error"]["code"] == "internal_error"
        await fault(client, "http_429", seconds=9)
        limited = await client.get("/api/v1/offers")
        assert limited.status_code == 429 and "retry-after" not in limited.headers
        assert limited.json() == {
            "error": {"code": "rate_limited", "message": "Too many requests."}
        }

    async def test_unknown_paths_and_methods_answer_in_quantaclouds_envelope(
        self, client: httpx.AsyncClient
    ) -> None:
        nowhere = await client.get("/api/v1/nothing-here", headers=KEY)
        assert nowhere.status_code == 404
        assert nowhere.json() == {"error": {"code": "not_found", "message": "Resource not found."}}
        wrong = await client.delete("/api/v1/account", headers=KEY)
        assert wrong.status_code == 405 and "GET" in wrong.headers["allow"]
        assert wrong.json()["error"]["code"] == "method_not_allowed"

    async def test_3000_requests_per_15_minutes_per_ip(self, client: httpx.AsyncClient) -> None:
        codes = [(await client.get("/api/v1/gpu-families")).status_code for _ in range(3000)]
        assert set(codes) == {200}
        over = await client.get("/api/v1/account", headers=KEY)
        assert over.status_code == 429 and over.json()["error"]["code"] == "rate_limited"
        assert (await client.get("/_sim/catalog")).status_code == 200  # control API not counted
        await client.put("/_sim/config", json={"rate_limits": False})
        assert (await client.get("/api/v1/gpu-families")).status_code == 200

    async def test_bad_config_values_are_refused(self, client: httpx.AsyncClient) -> None:
        for body in ({"cooldown_seconds": -1}, {"deployment_details": "yes"}):
            assert (await client.put("/_sim/config", json=body)).status_code == 422
