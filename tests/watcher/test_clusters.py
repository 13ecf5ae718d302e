"""Orders for a cluster, end to end: REST API in, simulators out, real adapters, both databases.

A Verda Instant Cluster is one provider object: one create, one id, one discontinue, one price
for all its nodes; the order shows its nodes and the login node that reaches them.
"""

from decimal import Decimal
from typing import Any

import httpx
import pytest

from app.settings import Settings
from app.simulators.control import SimControl
from tests.factories import AccountHandle, create_account, order_body
from tests.waiting import eventually
from tests.watcher.orders import events, order, place, reaches, timeline

VERDA_16H200 = ("verda", "16H200", "FIN-01")  # 2 nodes of 8 H200: $54.24/h
VERDA_8H200 = ("verda", "8H200.141S.176V", "FIN-01")  # one node of the same: $27.12/h
CLUSTER_PATHS = ("/v1/clusters",)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Real-length billing hours (a cluster terminated within seconds used one block); running
    machines read every 0.2 s."""
    return settings.model_copy(
        update={"billing_hour_seconds": 3600.0, "running_check_seconds": 0.2}
    )


def h200(**overrides: Any) -> dict[str, Any]:
    """An order for 2 nodes of 8 H200 at Verda, up to $70/h for the whole cluster."""
    body = {
        "gpu_model": "H200",
        "gpu_count": 8,
        "nodes": 2,
        "providers": ["verda"],
        "max_price_per_hour": "70.00",
        **overrides,
    }
    return order_body(**body)


async def terminate(client: httpx.AsyncClient, handle: AccountHandle, order_id: str) -> Any:
    answer = await client.post(f"/v1/orders/{order_id}/terminate", headers=handle.headers)
    assert answer.status_code == 202, answer.text
    return answer.json()


async def cluster_creates(sim: SimControl) -> list[dict[str, Any]]:
    return [c for c in await sim.creates("verda") if c["kind"] == "cluster"]


class TestVerdaInstantCluster:
    async def test_a_two_node_order_deploys_one_cluster_runs_and_is_discontinued(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit="200")
        order_id = await place(client, handle, h200())
        await sim.stock(*VERDA_16H200, 1)
        running = await reaches(client, handle, order_id, "running", seconds=10)

        (create,) = await cluster_creates(sim)  # one create for the whole cluster
        assert (create["sku"], create["region"]) == ("16H200", "FIN-01")
        assert [c for c in await sim.creates("verda") if c["kind"] != "cluster"] == []
        deployment = running["deployment"]
        assert (deployment["instance_type"], deployment["nodes"]) == ("16H200", 2)
        assert deployment["provider_vm_id"] == f"cluster:{create['vm_id']}"
        (cluster,) = await sim.clusters("verda")
        assert cluster["id"] == create["vm_id"]
        # The whole cluster's price, held and paid for one hour: both nodes and the volume.
        assert Decimal(deployment["price_per_hour"]) >= Decimal("54.24")
        assert running["charged_usd"] == deployment["price_per_hour_with_fees"]
        # Reached through its login node; each node is listed with its address inside.
        assert running["login_ip"] == deployment["ip"] is not None
        assert running["ssh_command"] == f"ssh root@{running['login_ip']}"
        machines = running["machines"]
        assert len(machines) == 2
        assert all(m["state"] == "running" and m["ip"] for m in machines)
        assert len({m["provider_vm_id"] for m in machines}) == 2
        (line,) = [
            e["message"] for e in await timeline(client, handle, order_id) if e["kind"] == "running"
        ]
        assert line.startswith(f"Running at {running['login_ip']} (its login node); paid until")

        await terminate(client, handle, order_id)
        ended = await reaches(client, handle, order_id, "terminated", seconds=10)
        discontinues = [
            r
            for r in await sim.requests("verda")
            if (r["method"], r["path"]) == ("PUT", "/v1/clusters")
        ]
        assert len(discontinues) >= 1
        (cluster,) = await sim.clusters("verda")
        assert cluster["status"] == "discontinued"
        # Its shared volume, which discontinuing only detaches, was deleted for good before
        # the order ended: nothing of it bills on.
        (volume,) = await sim.volumes("verda")
        assert (volume["cluster_id"], volume["status"]) == (cluster["id"], "deleted")
        assert (await sim._send("GET", "verda", "balance"))["hourly_charge"] == "0"
        # Verda bills in 10-minute blocks: one used, the other five sixths come back.
        price = Decimal(deployment["price_per_hour_with_fees"])
        assert Decimal(ended["charged_usd"]) == (price / 6).quantize(Decimal("0.01"))
        assert (await events(client, handle, order_id))[-2:] == ["terminating", "terminated"]
        # The timeline names the cluster by Verda's id alone, never by our composite one.
        said = " ".join(e["message"] for e in await timeline(client, handle, order_id))
        assert f"cluster {create['vm_id']}" in said and "cluster:" not in said
        assert all(m["state"] == "gone" for m in ended["machines"])

    async def test_a_cluster_is_never_taken_for_one_machine_nor_one_machine_for_a_cluster(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit="500")
        cluster_order = await place(client, handle, h200())
        single_order = await place(client, handle, h200(nodes=1, max_price_per_hour="70.00"))
        await sim.stock(*VERDA_8H200, 2)  # two single machines: not a cluster
        single = await reaches(client, handle, single_order, "running", seconds=10)
        assert (single["deployment"]["nodes"], single["machines"][0]["name"]) == (
            1,
            f"ap-{single_order.removeprefix('ord_')}-1",
        )
        assert (await order(client, handle, cluster_order))["status"] == "waiting"
        assert await cluster_creates(sim) == []
        # Positive control: the same order deploys once a cluster shows.
        await sim.stock(*VERDA_16H200, 1)
        deployed = await reaches(client, handle, cluster_order, "running", seconds=10)
        assert deployed["deployment"]["instance_type"] == "16H200"
        assert len(await cluster_creates(sim)) == 1


async def running_cluster(
    client: httpx.AsyncClient, sim: SimControl, **overrides: Any
) -> tuple[AccountHandle, str, dict[str, Any]]:
    handle = await create_account(client, credit="200")
    order_id = await place(client, handle, h200(**overrides))
    await sim.stock(*VERDA_16H200, 1)
    return handle, order_id, await reaches(client, handle, order_id, "running", seconds=10)


async def lose_a_node(sim: SimControl, running: dict[str, Any]) -> str:
    cluster_id = running["deployment"]["provider_vm_id"].removeprefix("cluster:")
    node_id: str = running["machines"][0]["provider_vm_id"]
    await sim._send("POST", "verda", f"clusters/{cluster_id}/nodes/{node_id}/end")
    return node_id


class TestLostNode:
    async def test_a_lost_node_is_told_and_the_rest_runs_on_until_the_owner_decides(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle, order_id, running = await running_cluster(client, sim)
        lost = await lose_a_node(sim, running)

        async def told() -> list[str] | None:
            kinds = await events(client, handle, order_id)
            return kinds if "node_lost" in kinds else None

        await eventually(told, seconds=10)
        shown = await order(client, handle, order_id)
        assert shown["status"] == "running"  # the user decides
        states = {m["provider_vm_id"]: m["state"] for m in shown["machines"]}
        assert states[lost] == "failed"
        assert sorted(states.values()) == ["failed", "running"]
        (line,) = [e for e in await timeline(client, handle, order_id) if e["kind"] == "node_lost"]
        assert lost in line["message"] and "1 left" in line["message"]
        # Said once, however many times the running watch reads the cluster since.
        await terminate(client, handle, order_id)
        await reaches(client, handle, order_id, "terminated", seconds=10)
        assert (await events(client, handle, order_id)).count("node_lost") == 1

    async def test_an_order_that_asked_for_it_is_terminated_and_refunded(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle, order_id, running = await running_cluster(client, sim, on_node_lost="terminate")
        await lose_a_node(sim, running)
        ended = await reaches(client, handle, order_id, "terminated", seconds=10)
        assert ended["terminate_reason"] == "node_lost"
        (cluster,) = await sim.clusters("verda")
        assert cluster["status"] == "discontinued"
        price = Decimal(running["deployment"]["price_per_hour_with_fees"])
        assert Decimal(ended["charged_usd"]) == (price / 6).quantize(Decimal("0.01"))
        kinds = await events(client, handle, order_id)
        assert kinds[-3:] == ["node_lost", "terminating", "terminated"]


class TestPlacing:
    @pytest.mark.parametrize(
        ("overrides", "field", "says"),
        [
            ({"nodes": 17}, "nodes", "less than or equal to 16"),
            ({"nodes": 0}, "nodes", "greater than or equal to 1"),
            ({"nodes": "2"}, "nodes", "integer"),
            ({"providers": ["quantacloud"]}, "providers", "makes no clusters"),
            ({"providers": ["verda", "quantacloud"]}, "providers", "QuantaCloud makes no clu"),
            (
                {"providers": ["verda", "hyperstack"], "cluster_interconnect": "infiniband"},
                "providers",
                "Hyperstack has no infiniband between a cluster's nodes",
            ),
            ({"gpu_model": "H100"}, "providers", "Verda makes clusters of B200, B300, H200 only"),
            ({"gpu_count": 4}, "providers", "nodes with 8 GPUs only"),
            ({"nodes": 1, "cluster_interconnect": "infiniband"}, "cluster_interconnect", "2 or"),
            ({"cluster_interconnect": "ethernet"}, "cluster_interconnect", "infiniband"),
            ({"on_node_lost": "pray"}, "on_node_lost", "keep"),
        ],
    )
    async def test_a_cluster_that_cannot_be_made_is_a_422_naming_the_field(
        self, client: httpx.AsyncClient, overrides: dict[str, Any], field: str, says: str
    ) -> None:
        handle = await create_account(client)
        answer = await client.post("/v1/orders", json=h200(**overrides), headers=handle.headers)
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert [d["field"] for d in error["details"]] == [field]
        assert says in error["details"][0]["message"]
        listed = await client.get("/v1/orders", headers=handle.headers)
        assert listed.json()["data"] == []

    async def test_a_cluster_order_shows_what_it_asked_for(self, client: httpx.AsyncClient) -> None:
        handle = await create_account(client)
        body = h200(cluster_interconnect="InfiniBand", on_node_lost="terminate")
        answer = await client.post("/v1/orders", json=body, headers=handle.headers)
        assert answer.status_code == 201, answer.text
        placed = answer.json()
        assert (placed["nodes"], placed["cluster_interconnect"], placed["on_node_lost"]) == (
            2,
            "infiniband",
            "terminate",
        )
        assert (placed["machines"], placed["login_ip"]) == ([], None)
        lines = await timeline(client, handle, placed["id"])
        assert lines[0]["message"].startswith(
            "Order placed: 2 nodes of 8x H200 (infiniband) on Verda at up to $70.00/h"
        )
        # Positive control for the refusals above: the defaults are a single machine, kept.
        single = await client.post(
            "/v1/orders",
            json=order_body(gpu_model="H100", gpu_count=1, providers=["quantacloud"]),
            headers=handle.headers,
        )
        assert single.status_code == 201, single.text
        assert (single.json()["nodes"], single.json()["on_node_lost"]) == (1, "keep")
