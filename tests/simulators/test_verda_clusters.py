"""The simulated Verda's Instant Clusters over HTTP: types, stock, create, lifecycle, billing,
faults and the control API, on a clock the test moves."""

import uuid
from decimal import Decimal
from typing import Any

import httpx
import pytest

from app.simulators.verda import VerdaSimulator, build_app
from tests.clock import FakeClock
from tests.fixtures.simulators import in_process
from tests.waiting import eventually

IMAGE = "ubuntu-24.04-cuda-13.0-cluster"
B200 = ("16B200", "FIN-01")  # 2 nodes of 8 B200, $71.84/h for the whole cluster
PRICE = Decimal("71.84")
# The 2000 GB shared volume `cluster_body` sizes, billed apart by the second at its own type's
# price (`NVMe_Shared_Cluster`, $0.30/GB-month here) over 730 hours.
VOLUME = Decimal("0.3") / 730 * 2000


def volume_cost(seconds: int) -> Decimal:
    """What the 2000 GB shared volume costs over `seconds`, to the micro-dollar."""
    return (VOLUME * seconds / 3600).quantize(Decimal("0.000001"))


START = Decimal("10000.00")  # every simulator's balance after a reset

sim, client = in_process(VerdaSimulator, build_app)


@pytest.fixture
async def auth(client: httpx.AsyncClient) -> dict[str, str]:
    body = {"grant_type": "client_credentials", "client_id": "sim-client"}
    token = await client.post("/v1/oauth2/token", json=body | {"client_secret": "sim-secret"})
    return {"Authorization": f"Bearer {token.json()['access_token']}"}


async def set_stock(client: httpx.AsyncClient, sku: str, region: str, quantity: int) -> None:
    body = {"sku": sku, "region": region, "quantity": quantity}
    assert (await client.put("/_sim/stock", json=body)).status_code == 200


async def stock_of(client: httpx.AsyncClient, sku: str, region: str) -> int:
    catalog = (await client.get("/_sim/catalog")).json()
    return int(next(e["stock"] for e in catalog if (e["sku"], e["region"]) == (sku, region)))


async def fault(client: httpx.AsyncClient, kind: str, **extra: Any) -> None:
    assert (await client.post("/_sim/faults", json={"kind": kind, **extra})).status_code == 201


async def boot_seconds(client: httpx.AsyncClient, seconds: float) -> None:
    assert (await client.put("/_sim/config", json={"boot_seconds": seconds})).status_code == 200


def cluster_body(**overrides: Any) -> dict[str, Any]:
    """What the SDK's `clusters.create` sends (`contract` and `shared_volume` always)."""
    body: dict[str, Any] = {
        "hostname": "ap-01jd3x-1",
        "cluster_type": B200[0],
        "image": IMAGE,
        "description": "autoprovision ap-order-01jd3x",
        "ssh_key_ids": [],
        "contract": "PAY_AS_YOU_GO",
        "location_code": B200[1],
        "startup_script_id": None,
        "shared_volume": {"name": "ap-01jd3x-1-home", "size": 2000},
    }
    return {**body, **overrides}


async def create(client: httpx.AsyncClient, auth: dict[str, str], **overrides: Any) -> str:
    response = await client.post("/v1/clusters", json=cluster_body(**overrides), headers=auth)
    assert response.status_code == 202, response.text
    cluster_id: str = response.json()["id"]
    return cluster_id


async def shown(client: httpx.AsyncClient, auth: dict[str, str], cluster_id: str) -> Any:
    response = await client.get(f"/v1/clusters/{cluster_id}", headers=auth)
    assert response.status_code == 200
    return response.json()


async def discontinue(client: httpx.AsyncClient, auth: dict[str, str], *ids: str) -> httpx.Response:
    body = {"actions": [{"id": i, "action": "discontinue"} for i in ids]}
    return await client.put("/v1/clusters", json=body, headers=auth)


class TestCatalogue:
    async def test_cluster_types_are_public_priced_for_the_whole_cluster(
        self, client: httpx.AsyncClient
    ) -> None:
        response = await client.get("/v1/cluster-types", params={"currency": "usd"})
        assert response.status_code == 200
        types = {t["cluster_type"]: t for t in response.json()}
        b200 = types["16B200"]
        assert b200["price_per_hour"] == "71.84" and b200["currency"] == "usd"
        assert (b200["model"], b200["gpu"]["number_of_gpus"]) == ("B200", 16)
        assert b200["node_details"][0] == "2x 8 GPU nodes"
        assert {"16B300", "16B200", "32B200", "64B200", "16H200"} <= set(types)
        eur = await client.get("/v1/cluster-types", params={"currency": "eur"})
        assert eur.status_code == 400

    async def test_the_control_catalogue_lists_cluster_kinds_with_their_nodes(
        self, client: httpx.AsyncClient
    ) -> None:
        catalog = (await client.get("/_sim/catalog")).json()
        kinds = {(e["sku"], e["region"]): e for e in catalog}
        cluster = kinds[B200]
        assert (cluster["kind"], cluster["nodes"], cluster["gpus_per_node"]) == ("cluster", 2, 8)
        assert (cluster["gpu_count"], cluster["price_per_hour"]) == (16, "71.84")
        assert kinds[("64B200", "FIN-01")]["nodes"] == 8
        instance = kinds[("8B200.240V", "FIN-01")]
        assert (instance["kind"], instance["nodes"], instance["gpus_per_node"]) == (
            "instance",
            1,
            8,
        )

    async def test_cluster_stock_shows_in_cluster_availability_only(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B200, 1)
        await set_stock(client, "8B200.240V", "FIN-01", 1)
        clusters = (await client.get("/v1/cluster-availability", headers=auth)).json()
        by_location = {loc["location_code"]: loc["availabilities"] for loc in clusters}
        assert by_location["FIN-01"] == ["16B200"] and by_location["FIN-03"] == []
        one = await client.get(
            "/v1/cluster-availability", params={"location_code": "FIN-01"}, headers=auth
        )
        assert [loc["location_code"] for loc in one.json()] == ["FIN-01"]
        instances = (await client.get("/v1/instance-availability", headers=auth)).json()
        fin01 = next(loc for loc in instances if loc["location_code"] == "FIN-01")
        assert "8B200.240V" in fin01["availabilities"] and "16B200" not in fin01["availabilities"]
        for location, expected in (("FIN-01", True), ("FIN-03", False)):
            answer = await client.get(
                "/v1/cluster-availability/16B200",
                params={"location_code": location},
                headers=auth,
            )
            assert answer.json() is expected
        assert (await client.get("/v1/cluster-availability")).status_code == 401

    async def test_cluster_images(self, client: httpx.AsyncClient, auth: dict[str, str]) -> None:
        response = await client.get(
            "/v1/images/cluster", params={"instance_type": "16B200"}, headers=auth
        )
        images = {i["image_type"]: i for i in response.json()}
        assert images[IMAGE]["is_cluster"] is True and images[IMAGE]["is_default"] is True
        assert "ubuntu-24.04-cuda-12.8-open-docker" not in images


class TestCreate:
    async def test_a_create_answers_the_id_and_takes_one_unit_of_that_cluster_type(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B200, 2)
        await set_stock(client, "16B200", "FIN-03", 1)
        cluster_id = await create(client, auth)
        assert str(uuid.UUID(cluster_id)) == cluster_id
        assert await stock_of(client, *B200) == 1
        assert await stock_of(client, "16B200", "FIN-03") == 1  # another location's stock
        cluster = await shown(client, auth, cluster_id)
        assert (cluster["id"], cluster["hostname"], cluster["location"]) == (
            cluster_id,
            "ap-01jd3x-1",
            "FIN-01",
        )
        assert (cluster["cluster_type"], cluster["image"], cluster["status"]) == (
            "16B200",
            IMAGE,
            "ordered",
        )
        assert cluster["ip"] is None and len(cluster["worker_nodes"]) == 2
        assert cluster["shared_volumes"][0]["size_in_gigabytes"] == 2000
        assert cluster["shared_volumes"][0]["mount_point"] == "/home"

    async def test_no_stock_is_the_capacity_error_of_instance_creates(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B200, 1)
        await create(client, auth)
        second = await client.post("/v1/clusters", json=cluster_body(), headers=auth)
        assert second.status_code == 503
        assert second.json() == {"code": "service_unavailable", "message": "No capacity available"}
        not_sold_there = cluster_body(cluster_type="16B300")  # B300 clusters: FIN-03 only
        assert (
            await client.post("/v1/clusters", json=not_sold_there, headers=auth)
        ).status_code == 503

    @pytest.mark.parametrize("field", ["cluster_type", "image", "hostname", "location_code"])
    async def test_each_required_field_is_required(
        self, client: httpx.AsyncClient, auth: dict[str, str], field: str
    ) -> None:
        await set_stock(client, *B200, 1)
        body = cluster_body()
        del body[field]
        response = await client.post("/v1/clusters", json=body, headers=auth)
        assert response.status_code == 400 and response.json()["code"] == "invalid_request"
        assert await stock_of(client, *B200) == 1

    @pytest.mark.parametrize(
        "overrides",
        [{"cluster_type": "3Z999"}, {"cluster_type": "8B200.240V"}, {"location_code": "MARS-01"},
         {"image": "windows-95"}, {"image": "ubuntu-24.04-cuda-12.8-open-docker"},
         {"ssh_key_ids": [str(uuid.uuid4())]}, {"startup_script_id": str(uuid.uuid4())},
         {"contract": "FOREVER"}, {"shared_volume": {"name": "home", "size": 0}}],
    )  # fmt: skip
    async def test_unknown_names_and_bad_values_are_refused(
        self, client: httpx.AsyncClient, auth: dict[str, str], overrides: dict[str, Any]
    ) -> None:
        await set_stock(client, *B200, 1)
        response = await client.post("/v1/clusters", json=cluster_body(**overrides), headers=auth)
        assert response.status_code == 400 and response.json()["code"] == "invalid_request"
        assert await stock_of(client, *B200) == 1

    async def test_a_shared_volume_without_a_size_is_taken_and_recorded_as_not_sized(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B200, 2)
        body = {k: v for k, v in cluster_body().items() if k != "shared_volume"}
        unsized = (await client.post("/v1/clusters", json=body, headers=auth)).json()["id"]
        sized = await create(client, auth)
        volumes = {c: (await shown(client, auth, c))["shared_volumes"][0] for c in (unsized, sized)}
        assert volumes[unsized]["size_in_gigabytes"] == 30000  # the SDK's default
        assert volumes[unsized]["name"] == "ap-01jd3x-1-shared-volume"
        assert volumes[sized]["size_in_gigabytes"] == 2000
        recorded = {c["id"]: c for c in (await client.get("/_sim/clusters")).json()}
        assert recorded[unsized]["shared_volume_size"] is None
        assert recorded[sized]["shared_volume_size"] == 2000

    async def test_a_balance_below_one_hour_of_the_cluster_is_insufficient_funds(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B200, 1)
        await client.put("/_sim/config", json={"balance": "71.83"})
        response = await client.post("/v1/clusters", json=cluster_body(), headers=auth)
        assert response.status_code == 402 and response.json()["code"] == "insufficient_funds"
        await client.put("/_sim/config", json={"balance": "71.84"})
        assert (await client.post("/v1/clusters", json=cluster_body(), headers=auth)).is_success

    async def test_every_cluster_create_is_logged_as_one_create(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B200, 1)
        await client.post("/v1/clusters", json=cluster_body(image="nope"), headers=auth)
        made = await create(client, auth)
        await client.post("/v1/clusters", json=cluster_body(), headers=auth)
        creates = (await client.get("/_sim/creates")).json()
        assert [(c["kind"], c["outcome"], c["vm_id"]) for c in creates] == [
            ("cluster", "rejected", None),
            ("cluster", "created", made),
            ("cluster", "no_capacity", None),
        ]
        assert {(c["sku"], c["region"], c["name"]) for c in creates} == {
            ("16B200", "FIN-01", "ap-01jd3x-1")
        }
        assert (await client.get("/_sim/vms")).json() == []  # no instance was made


class TestLifecycle:
    async def test_ordered_then_provisioning_then_running_with_the_jump_hosts_ip(
        self, client: httpx.AsyncClient, auth: dict[str, str], fake_clock: FakeClock
    ) -> None:
        await boot_seconds(client, 0.3)
        await set_stock(client, *B200, 1)
        cluster_id = await create(client, auth)
        seen: list[str] = []

        async def running() -> bool:
            cluster = await shown(client, auth, cluster_id)
            if not seen or seen[-1] != cluster["status"]:
                seen.append(cluster["status"])
            assert (cluster["ip"] is not None) == (cluster["status"] == "running")
            assert {n["status"] for n in cluster["worker_nodes"]} == {cluster["status"]}
            return bool(cluster["status"] == "running")

        await eventually(running, clock=fake_clock)
        assert seen == ["ordered", "provisioning", "running"]
        nodes = (await shown(client, auth, cluster_id))["worker_nodes"]
        assert len({n["id"] for n in nodes}) == 2 and len({n["private_ip"] for n in nodes}) == 2
        assert [n["hostname"] for n in nodes] == ["ap-01jd3x-1-node-1", "ap-01jd3x-1-node-2"]

    async def test_fail_after_accept_ends_in_error(
        self, client: httpx.AsyncClient, auth: dict[str, str], fake_clock: FakeClock
    ) -> None:
        await boot_seconds(client, 0.2)
        await set_stock(client, *B200, 1)
        await fault(client, "fail_after_accept")
        cluster_id = await create(client, auth)
        fake_clock.advance(0.3)
        assert (await shown(client, auth, cluster_id))["status"] == "error"

    async def test_a_discontinued_cluster_leaves_the_list_and_stays_readable(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await boot_seconds(client, 0)
        await set_stock(client, *B200, 2)
        gone, kept = await create(client, auth), await create(client, auth)
        listed = (await client.get("/v1/clusters", headers=auth)).json()
        assert sorted(c["id"] for c in listed) == sorted([gone, kept])
        response = await discontinue(client, auth, gone)
        assert (response.status_code, response.content) == (202, b"")  # as Verda's document

        assert (await shown(client, auth, gone))["status"] == "discontinued"
        assert [c["id"] for c in (await client.get("/v1/clusters", headers=auth)).json()] == [kept]
        filtered = await client.get("/v1/clusters", params={"status": "discontinued"}, headers=auth)
        assert [c["id"] for c in filtered.json()] == [gone]
        again = await discontinue(client, auth, gone)
        assert (again.status_code, again.json()["code"]) == (403, "forbidden_action")

    async def test_unknown_ids_are_verdas_not_found(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await boot_seconds(client, 0)
        await set_stock(client, *B200, 1)
        missing = str(uuid.uuid4())
        got = await client.get(f"/v1/clusters/{missing}", headers=auth)
        assert got.status_code == 404
        assert got.json() == {"code": "not_found", "message": "Invalid cluster id"}
        deleted = await discontinue(client, auth, missing)
        assert deleted.status_code == 404 and deleted.json()["code"] == "not_found"
        known = await create(client, auth)  # with a known one as well: nothing is done
        both = await discontinue(client, auth, known, missing)
        assert both.status_code == 404
        assert (await shown(client, auth, known))["status"] != "discontinued"

    async def test_only_the_discontinue_action_in_the_sdks_body_is_taken(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B200, 1)
        cluster_id = await create(client, auth)
        for body in (
            {"action": "discontinue", "id": cluster_id},  # the instances' shape
            {"actions": [{"id": cluster_id, "action": "shutdown"}]},
        ):
            response = await client.put("/v1/clusters", json=body, headers=auth)
            assert response.status_code == 400
        assert (await shown(client, auth, cluster_id))["status"] == "ordered"


class TestBilling:
    async def test_a_cluster_bills_its_whole_price_and_its_volume_apart_from_running(
        self,
        client: httpx.AsyncClient,
        auth: dict[str, str],
        sim: VerdaSimulator,
        fake_clock: FakeClock,
    ) -> None:
        await boot_seconds(client, 60)
        await set_stock(client, *B200, 1)
        await create(client, auth)
        fake_clock.advance(30)
        assert sim.balance == START  # provisioning costs nothing
        fake_clock.advance(30 + 3600)
        # An hour of running: six 10-minute blocks of the cluster, 3,600 seconds of the volume.
        assert sim.balance == START - PRICE - volume_cost(3600)
        balance = (await client.get("/_sim/balance")).json()
        assert Decimal(balance["hourly_charge"]) == PRICE + VOLUME
        (cluster,) = (await client.get("/_sim/clusters")).json()
        assert Decimal(cluster["charged"]) == PRICE
        (volume,) = (await client.get("/_sim/volumes")).json()
        assert (volume["type"], volume["size_gb"], volume["status"]) == (
            "NVMe_Shared_Cluster",
            2000,
            "attached",
        )
        assert Decimal(volume["charged"]) == volume_cost(3600)

    async def test_a_discontinued_cluster_stops_billing_its_shared_volume_bills_on(
        self, client: httpx.AsyncClient, auth: dict[str, str], fake_clock: FakeClock
    ) -> None:
        """ "Shared volumes will be detached and should be deleted manually" (the document of
        `PUT /v1/clusters`): the volume bills until it is deleted."""
        await boot_seconds(client, 0)
        await set_stock(client, *B200, 2)
        gone, kept = await create(client, auth), await create(client, auth)
        fake_clock.advance(3600)
        assert (await discontinue(client, auth, gone)).status_code == 202
        fake_clock.advance(3600)
        charged = {
            c["id"]: Decimal(c["charged"]) for c in (await client.get("/_sim/clusters")).json()
        }
        assert charged == {gone: PRICE, kept: 2 * PRICE}  # the one still running kept billing
        volumes = {v["cluster_id"]: v for v in (await client.get("/_sim/volumes")).json()}
        assert volumes[gone]["status"] == "detached"
        assert Decimal(volumes[gone]["charged"]) == volume_cost(7200)
        balance = (await client.get("/_sim/balance")).json()
        assert Decimal(balance["balance"]) == START - 3 * PRICE - 2 * volume_cost(7200)
        assert Decimal(balance["hourly_charge"]) == PRICE + 2 * VOLUME
        deleted = await client.request(
            "DELETE",
            f"/v1/volumes/{volumes[gone]['id']}",
            json={"is_permanent": True},
            headers=auth,
        )
        assert deleted.status_code == 202
        fake_clock.advance(3600)
        (left,) = [v for v in (await client.get("/_sim/volumes")).json() if v["cluster_id"] == gone]
        assert (left["status"], left["hourly_price"]) == ("deleted", "0")
        assert Decimal(left["charged"]) == volume_cost(7200)

    async def test_a_cluster_verda_ends_stops_billing_and_leaves_the_list(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await boot_seconds(client, 0)
        await set_stock(client, *B200, 1)
        cluster_id = await create(client, auth)
        hourly = Decimal((await client.get("/_sim/balance")).json()["hourly_charge"])
        assert hourly == PRICE + VOLUME
        ended = await client.post(f"/_sim/clusters/{cluster_id}/end")
        assert ended.json()["status"] == "discontinued"
        assert (await client.get("/v1/clusters", headers=auth)).json() == []
        # Its shared volume is left detached, billing (what Verda does is not documented).
        hourly = Decimal((await client.get("/_sim/balance")).json()["hourly_charge"])
        assert hourly == VOLUME

    async def test_the_shared_volume_bills_by_its_size_the_sdks_default_too(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await boot_seconds(client, 0)
        await set_stock(client, *B200, 2)
        await create(client, auth, shared_volume={"name": "home", "size": 100})
        await create(client, auth, shared_volume=None)  # Verda's default: 30 TB
        prices = [Decimal(c["price_per_hour"]) for c in (await client.get("/_sim/clusters")).json()]
        assert prices == [PRICE, PRICE]  # the volumes bill apart
        volumes = sorted(
            Decimal(v["hourly_price"]) for v in (await client.get("/_sim/volumes")).json()
        )
        per_gb = Decimal("0.3") / 730
        assert volumes == [per_gb * 100, per_gb * 30000]


class TestFaultsAndLimits:
    async def test_a_request_fault_hits_a_cluster_create_before_anything_is_made(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B200, 1)
        await fault(client, "http_500", status=503)
        response = await client.post("/v1/clusters", json=cluster_body(), headers=auth)
        assert response.status_code == 503 and response.json()["code"] == "server_error"
        assert await stock_of(client, *B200) == 1
        assert (await client.get("/_sim/clusters")).json() == []
        await fault(client, "http_429", seconds=7)
        limited = await client.get("/v1/clusters", headers=auth)
        assert limited.status_code == 429 and limited.headers["retry-after"] == "7"
        assert (await client.post("/v1/clusters", json=cluster_body(), headers=auth)).is_success

    async def test_an_error_after_commit_makes_the_cluster_and_answers_500(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B200, 1)
        await fault(client, "create_error_after_commit")
        response = await client.post("/v1/clusters", json=cluster_body(), headers=auth)
        assert response.status_code == 500 and response.json()["code"] == "server_error"
        listed = (await client.get("/v1/clusters", headers=auth)).json()
        assert [c["hostname"] for c in listed] == ["ap-01jd3x-1"]
        assert await stock_of(client, *B200) == 0

    async def test_a_capacity_race_refuses_although_stock_is_shown(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B200, 1)
        await fault(client, "capacity_race")
        response = await client.post("/v1/clusters", json=cluster_body(), headers=auth)
        assert response.status_code == 503 and await stock_of(client, *B200) == 1
        assert (await client.post("/v1/clusters", json=cluster_body(), headers=auth)).is_success

    async def test_create_refused_refuses_the_next_cluster_create_as_verda_would(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B200, 1)
        await fault(client, "create_refused", status=409, reason="conflict", message="Busy")
        response = await client.post("/v1/clusters", json=cluster_body(), headers=auth)
        assert (response.status_code, response.json()) == (
            409,
            {"code": "conflict", "message": "Busy"},
        )
        creates = (await client.get("/_sim/creates")).json()
        assert [(c["outcome"], c["kind"]) for c in creates] == [("refused", "cluster")]
        assert await stock_of(client, *B200) == 1
        assert (await client.post("/v1/clusters", json=cluster_body(), headers=auth)).is_success

    async def test_a_refused_discontinue_fault_refuses_once(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        await set_stock(client, *B200, 1)
        cluster_id = await create(client, auth)
        await fault(client, "delete_refused")
        refused = await discontinue(client, auth, cluster_id)
        assert refused.status_code == 403 and refused.json()["code"] == "forbidden_action"
        assert (await discontinue(client, auth, cluster_id)).status_code == 202

    async def test_sixty_reads_of_one_cluster_path_per_minute(
        self, client: httpx.AsyncClient, auth: dict[str, str]
    ) -> None:
        for _ in range(60):
            assert (await client.get("/v1/clusters", headers=auth)).status_code == 200
        over = await client.get("/v1/clusters", headers=auth)
        assert over.status_code == 429 and over.json()["code"] == "rate_limit_exceeded"
        assert (await client.get("/v1/cluster-availability", headers=auth)).status_code == 200

    async def test_reset_forgets_clusters(
        self, client: httpx.AsyncClient, auth: dict[str, str], sim: VerdaSimulator
    ) -> None:
        await set_stock(client, *B200, 1)
        await create(client, auth)
        assert len(sim.clusters) == 1
        await client.post("/_sim/reset")
        assert sim.clusters == {} and await stock_of(client, *B200) == 0
