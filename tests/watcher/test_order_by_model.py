"""Ordering by model: `{"model": "moonshotai/Kimi-K3", ...}` expands to every shape that holds it
(the alternatives the order shows), and one of them deploys. Black box, both databases."""

from typing import Any

import httpx
import pytest

from app.simulators.control import SimControl
from tests.factories import create_account
from tests.watcher.orders import order, place, reaches

KIMI = "moonshotai/Kimi-K3"
VERDA_DEFAULT = "ubuntu-24.04-cuda-12.8-open-docker"  # the configured image, R570
VERDA_16H200 = ("verda", "16H200", "FIN-01")  # 2 nodes of 8 H200


def shapes(order: dict[str, Any]) -> list[tuple[str, int, int, list[str], str]]:
    return [
        (a["gpu_model"], a["gpu_count"], a["nodes"], a["providers"], a["max_price_per_hour"])
        for a in order["alternatives"]
    ]


async def test_kimi_k3_at_verda_is_one_b300_or_two_nodes_of_b200_or_h200(
    client: httpx.AsyncClient,
) -> None:
    handle = await create_account(client)
    body = {"model": KIMI, "providers": ["verda"], "max_price_per_hour": "70.00"}
    answer = await client.post("/v1/orders", json=body, headers=handle.headers)
    assert answer.status_code == 201, answer.text
    order = answer.json()
    assert order["model"] == KIMI
    assert shapes(order) == [
        ("B300", 8, 1, ["verda"], "70.00"),
        ("B200", 8, 2, ["verda"], "70.00"),
        ("H200", 8, 2, ["verda"], "70.00"),
    ]
    # Each with a disk that holds the 1,561 GB checkpoint and NVLink between its GPUs.
    assert {(a["min_disk_gb"], a["interconnect"]) for a in order["alternatives"]} == {
        (1561, "nvlink")
    }
    assert ("H200", 8, 1, ["verda"], "70.00") not in shapes(order)  # one 8x H200 is too small
    said = await client.get(f"/v1/orders/{order['id']}/events", headers=handle.headers)
    assert said.json()[0]["message"].startswith(f"Order placed: for {KIMI}, 8x B300 on Verda")


async def test_a_cluster_goes_only_to_the_providers_that_can_make_it_and_prices_override(
    client: httpx.AsyncClient,
) -> None:
    handle = await create_account(client)
    body = {
        "model": KIMI,
        "providers": ["verda", "hyperstack", "quantacloud"],
        "max_price_per_hour": "70.00",
        "prices": [{"gpu_model": "h200", "gpu_count": 8, "nodes": 2, "max_price_per_hour": "60"}],
    }
    answer = await client.post("/v1/orders", json=body, headers=handle.headers)
    assert answer.status_code == 201, answer.text
    assert shapes(answer.json()) == [
        ("B300", 8, 1, ["verda", "hyperstack", "quantacloud"], "70.00"),
        ("B200", 8, 2, ["verda", "hyperstack"], "70.00"),
        ("H200", 8, 2, ["verda", "hyperstack"], "60.00"),
        ("H100", 8, 3, ["hyperstack"], "70.00"),
    ]


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"model": "acme/Nothing"}, "model", "unknown model 'acme/Nothing'"),
        ({"gpu_model": "B300"}, "gpu_model", "is chosen from the model"),
        ({"nodes": 2}, "nodes", "is chosen from the model"),
        ({"min_cache_gb": 50000}, "model", "with 50000 GB for the cache"),
        (
            {"prices": [{"gpu_model": "H100", "gpu_count": 8, "max_price_per_hour": "9"}]},
            "prices",
            "1 x 8x H100 is not a shape this order takes",
        ),
        ({"providers": None}, "providers", "Field required"),
        ({"max_price_per_hour": None}, "max_price_per_hour", "Field required"),
        ({"model": None, "prices": []}, "prices", "must list at least one"),
        (
            {"model": None, "gpu_model": "B300", "gpu_count": 8, "min_cache_gb": 10},
            "min_cache_gb",
            "give model too",
        ),
    ],
)
async def test_a_bad_order_by_model_is_a_422_naming_the_field(
    client: httpx.AsyncClient, change: dict[str, Any], field: str, says: str
) -> None:
    handle = await create_account(client)
    body = {"model": KIMI, "providers": ["verda"], "max_price_per_hour": "70.00", **change}
    body = {k: v for k, v in body.items() if v is not None}
    answer = await client.post("/v1/orders", json=body, headers=handle.headers)
    assert answer.status_code == 422, answer.text
    details = answer.json()["error"]["details"]
    assert any(d["field"] == field and says in d["message"] for d in details), details


async def test_an_order_by_model_deploys_the_shape_that_shows(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    handle = await create_account(client, credit="200")
    body = {"model": KIMI, "providers": ["verda"], "max_price_per_hour": "70.00"}
    order_id = await place(client, handle, body)
    await sim.stock(*VERDA_16H200, 1)
    running = await reaches(client, handle, order_id, "running", seconds=10)
    assert running["deployment"]["alternative"] == 3  # 2 nodes of 8x H200
    assert running["deployment"]["instance_type"] == "16H200"
    (create,) = [c for c in await sim.creates("verda") if c["kind"] == "cluster"]
    assert create["sku"] == "16H200"


async def test_a_preview_shows_the_expansion_and_places_nothing(
    client: httpx.AsyncClient,
) -> None:
    handle = await create_account(client)
    body = {"model": KIMI, "providers": ["verda"], "max_price_per_hour": "70.00"}
    answer = await client.post("/v1/orders/preview", json=body, headers=handle.headers)
    assert answer.status_code == 200, answer.text
    preview = answer.json()
    assert (preview["model"], preview["prefer"]) == (KIMI, "cheapest")
    assert [(a["gpu_model"], a["nodes"]) for a in preview["alternatives"]] == [
        ("B300", 1),
        ("B200", 2),
        ("H200", 2),
    ]
    listed = await client.get("/v1/orders", headers=handle.headers)
    assert listed.json()["data"] == []
    # The preview refuses what placing would: a cluster at a provider that cannot make one.
    bad = {"gpu_model": "H200", "gpu_count": 8, "nodes": 2, "providers": ["quantacloud"]}
    refused = await client.post(
        "/v1/orders/preview", json={**bad, "max_price_per_hour": "70"}, headers=handle.headers
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["details"][0]["field"] == "providers"


class TestServe:
    async def test_the_generated_script_reaches_the_machine_and_the_order_shows_the_tunnel(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit="100")
        body = {
            "model": "moonshotai/Kimi-K2.7-Code",
            "providers": ["verda", "quantacloud"],
            "max_price_per_hour": "40.00",
            "serve": {"engine": "vllm"},
        }
        preview = await client.post("/v1/orders/preview", json=body, headers=handle.headers)
        assert preview.status_code == 200, preview.text
        script = preview.json()["startup_script"]
        assert "vllm/vllm-openai:latest" in script and "moonshotai/Kimi-K2.7-Code" in script
        # QuantaCloud runs no script: every alternative leaves it out when deploying.
        order_id = await place(client, handle, body)
        placed = await order(client, handle, order_id)
        assert placed["serve_engine"] == "vllm" and placed["startup_script_bytes"] == len(
            script.encode()
        )
        await sim.stock("verda", "4B300.120V", "FIN-03", 1)  # 4x B300 holds it
        running = await reaches(client, handle, order_id, "running", seconds=10)
        (create,) = await sim.creates("verda")
        assert create["startup_script"] == script  # byte for byte
        # The script needs R580: not the configured image (R570) but one with that driver.
        assert create["image"] == "ubuntu-24.04-cuda-13.0-open-docker"
        drivers = {i["image_type"]: i["driver"] for i in await sim.images("verda")}
        assert drivers[create["image"]] >= 580 > drivers[VERDA_DEFAULT]
        said = await client.get(f"/v1/orders/{order_id}/events", headers=handle.headers)
        assert any(
            f"Boots {create['image']}: the configured {VERDA_DEFAULT} has R570; the serve "
            "script needs R580 or newer." in line["message"]
            for line in said.json()
        ), said.text
        ip = running["deployment"]["ip"]
        assert running["serve_tunnel"] == f"ssh -N -L 8000:127.0.0.1:8000 root@{ip}"

    @pytest.mark.parametrize(
        ("change", "field", "says"),
        [
            ({"serve": {"engine": "tgi"}}, "serve.engine", "'vllm' or 'sglang'"),
            ({"startup_script": "echo mine"}, "startup_script", "serve writes the start-up"),
            ({"providers": ["quantacloud"]}, "startup_script", "cannot run a start-up script"),
            ({"model": None, "gpu_model": "B300", "gpu_count": 8}, "serve", "give model too"),
        ],
    )
    async def test_a_bad_serve_is_a_422_naming_the_field(
        self, client: httpx.AsyncClient, change: dict[str, Any], field: str, says: str
    ) -> None:
        handle = await create_account(client)
        body = {
            "model": KIMI,
            "providers": ["verda"],
            "max_price_per_hour": "70.00",
            "serve": {"engine": "vllm"},
            **change,
        }
        body = {k: v for k, v in body.items() if v is not None}
        answer = await client.post("/v1/orders", json=body, headers=handle.headers)
        assert answer.status_code == 422, answer.text
        details = answer.json()["error"]["details"]
        assert any(d["field"] == field and says in d["message"] for d in details), details


async def test_kimi_k27_code_includes_one_8x_h200(client: httpx.AsyncClient) -> None:
    handle = await create_account(client)
    body = {
        "model": "moonshotai/Kimi-K2.7-Code",
        "providers": ["verda", "hyperstack"],
        "max_price_per_hour": "40.00",
    }
    answer = await client.post("/v1/orders/preview", json=body, headers=handle.headers)
    assert answer.status_code == 200, answer.text
    taken = [(a["gpu_model"], a["gpu_count"], a["nodes"]) for a in answer.json()["alternatives"]]
    assert ("H200", 8, 1) in taken  # 1,128 GB: about 443 GB left for the cache
    assert ("B300", 4, 1) in taken and ("B200", 8, 1) in taken
