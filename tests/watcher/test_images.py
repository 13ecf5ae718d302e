"""An order's OS image, end to end: REST API in, simulators out, real adapters, both databases.
The image is checked against the lists the watcher reads from each provider when the order is
placed, reaches Verda (instances and clusters) and Hyperstack (every node) as named, and an
order naming one never deploys at QuantaCloud, which boots one stock image."""

from typing import Any

import httpx

from app.simulators.control import SimControl
from tests.factories import AccountHandle, create_account, order_body
from tests.waiting import eventually
from tests.watcher.orders import HYPER_H100, VERDA_H100, order, place, reaches

VERDA_CUDA13 = "ubuntu-24.04-cuda-13.0-open-docker"
VERDA_DEFAULT = "ubuntu-24.04-cuda-12.8-open-docker"  # the configured image (the setting's default)
VERDA_CLUSTER_IMAGE = "ubuntu-24.04-cuda-13.0-cluster"
HYPER_CUDA13 = "Ubuntu Server 24.04 LTS R580 CUDA 13.0 with Docker"
QUANTA_H100 = ("quantacloud", "h100-sxm-x1", "us-midwest-4")  # $2.46/h: cheaper than Verda's
VERDA_16H200 = ("verda", "16H200", "FIN-01")  # 2 nodes of 8 H200


def h100(providers: list[str], **overrides: Any) -> dict[str, Any]:
    """1x H100 at these providers, up to $3/h."""
    body = {
        "gpu_model": "H100",
        "gpu_count": 1,
        "providers": providers,
        "max_price_per_hour": "3.00",
        **overrides,
    }
    return order_body(**body)


async def lists_read(client: httpx.AsyncClient, handle: AccountHandle) -> None:
    """Wait until the watcher has read Verda's and Hyperstack's image lists: an image neither
    lists is refused at both (before the reads, it is taken and left to the create)."""

    async def refused() -> bool:
        for provider in ("verda", "hyperstack"):
            body = h100([provider], image="no-such-image")
            answer = await client.post("/v1/orders/preview", json=body, headers=handle.headers)
            if answer.status_code != 422:
                return False
        return True

    await eventually(refused, 10)


async def refusal(client: httpx.AsyncClient, handle: AccountHandle, body: dict[str, Any]) -> str:
    """The message of the 422 that names `image`."""
    answer = await client.post("/v1/orders", json=body, headers=handle.headers)
    assert answer.status_code == 422, answer.text
    (detail,) = answer.json()["error"]["details"]
    assert detail["field"] == "image", detail
    message: str = detail["message"]
    return message


async def test_an_image_a_provider_does_not_list_is_refused_when_placed(
    client: httpx.AsyncClient,
) -> None:
    handle = await create_account(client, credit="50")
    await lists_read(client, handle)
    said = await refusal(client, handle, h100(["verda"], image="ubuntu-99.04-cuda-42"))
    assert "Verda lists no image" in said and "ubuntu-99.04-cuda-42" in said
    said = await refusal(
        client, handle, h100(["verda", "hyperstack"], image="ubuntu-99.04-cuda-42")
    )
    assert said.startswith("Verda and Hyperstack list")
    # Verda keeps cluster images apart: an instance image does not boot a cluster.
    cluster = h100(["verda"], gpu_model="H200", gpu_count=8, nodes=2, max_price_per_hour="70")
    said = await refusal(client, handle, {**cluster, "image": VERDA_CUDA13})
    assert "Verda lists no image" in said
    # Positive controls: the names each provider lists are taken (by type or by id at Verda).
    for body in (
        h100(["verda"], image=VERDA_CUDA13),
        h100(["verda"], image="2404f580-1300-1111-82b3-f199fb9b701b"),
        h100(["hyperstack"], image=HYPER_CUDA13),
        {**cluster, "image": VERDA_CLUSTER_IMAGE},
    ):
        answer = await client.post("/v1/orders", json=body, headers=handle.headers)
        assert answer.status_code == 201, answer.text
        assert answer.json()["image"] == body["image"]


async def test_a_provider_that_does_not_list_the_image_is_taken_out_and_said(
    client: httpx.AsyncClient,
) -> None:
    handle = await create_account(client, credit="200")
    await lists_read(client, handle)
    # A Hyperstack name is not Verda's: an order at both deploys only at Hyperstack.
    body = h100(["verda", "hyperstack"], image=HYPER_CUDA13)
    placed = await client.post("/v1/orders", json=body, headers=handle.headers)
    assert placed.status_code == 201, placed.text
    assert placed.json()["providers"] == ["hyperstack"]
    lines = await client.get(f"/v1/orders/{placed.json()['id']}/events", headers=handle.headers)
    assert any(
        line["message"].startswith(f"Verda: lists no image '{HYPER_CUDA13}'")
        for line in lines.json()
    ), lines.text
    # Alternatives: a Verda cluster lists no instance image, so that alternative is left out
    # and the single machine stays.
    single = h100(["verda"], gpu_model="B300", gpu_count=8, max_price_per_hour="50")
    cluster = h100(["verda"], gpu_model="H200", gpu_count=8, nodes=2, max_price_per_hour="70")
    keys = ("gpu_model", "gpu_count", "nodes", "providers", "max_price_per_hour")
    both = {
        "alternatives": [{k: shape[k] for k in keys if k in shape} for shape in (single, cluster)],
        "image": VERDA_CUDA13,
    }
    preview = await client.post("/v1/orders/preview", json=both, headers=handle.headers)
    assert preview.status_code == 200, preview.text
    assert [a["gpu_model"] for a in preview.json()["alternatives"]] == ["B300"]
    # Positive control: without the image both alternatives stay.
    both.pop("image")
    preview = await client.post("/v1/orders/preview", json=both, headers=handle.headers)
    assert [a["gpu_model"] for a in preview.json()["alternatives"]] == ["B300", "H200"]


async def test_an_order_naming_only_a_stock_image_provider_is_refused(
    client: httpx.AsyncClient,
) -> None:
    handle = await create_account(client, credit="50")
    said = await refusal(client, handle, h100(["quantacloud"], image=VERDA_CUDA13))
    assert said.startswith("QuantaCloud boots one stock image")


async def test_verda_boots_the_image_the_order_names(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    handle = await create_account(client, credit="50")
    await lists_read(client, handle)
    imaged = await place(client, handle, h100(["verda"], image=VERDA_CUDA13))
    await sim.stock(*VERDA_H100, 1)
    await reaches(client, handle, imaged, "running", seconds=10)
    # Positive control: an order naming none boots the configured image.
    plain = await place(client, handle, h100(["verda"]))
    await sim.stock(*VERDA_H100, 1)
    await reaches(client, handle, plain, "running", seconds=10)
    assert [c["image"] for c in await sim.creates("verda")] == [VERDA_CUDA13, VERDA_DEFAULT]


async def test_a_verda_cluster_boots_the_cluster_image_the_order_names(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    handle = await create_account(client, credit="200")
    body = h100(["verda"], gpu_model="H200", gpu_count=8, nodes=2, max_price_per_hour="70")
    order_id = await place(client, handle, {**body, "image": VERDA_CLUSTER_IMAGE})
    await sim.stock(*VERDA_16H200, 1)
    await reaches(client, handle, order_id, "running", seconds=10)
    (create,) = await sim.creates("verda")
    assert (create["kind"], create["image"]) == ("cluster", VERDA_CLUSTER_IMAGE)


async def test_every_hyperstack_node_boots_the_image_the_order_names(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    handle = await create_account(client, credit="100")
    body = h100(["hyperstack"], nodes=2, max_price_per_hour="6.00", image=HYPER_CUDA13)
    order_id = await place(client, handle, body)
    await sim.stock(*HYPER_H100, 2)
    await reaches(client, handle, order_id, "running", seconds=10)
    creates = await sim.creates("hyperstack")
    assert [(c["outcome"], c["image"]) for c in creates] == [("created", HYPER_CUDA13)] * 2


async def test_an_order_with_an_image_never_deploys_at_quantacloud_but_elsewhere(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    handle = await create_account(client, credit="50")
    imaged = await place(client, handle, h100(["quantacloud", "verda"], image=VERDA_CUDA13))
    lines = (await client.get(f"/v1/orders/{imaged}/events", headers=handle.headers)).json()
    assert any(
        "QuantaCloud: boots one stock image; this order deploys only on Verda" in line["message"]
        for line in lines
    ), lines
    await sim.stock(*QUANTA_H100, 1)
    # Positive control: the stock is matchable; an order naming no image, placed after,
    # takes it (the older order with an image cannot).
    plain = await place(client, handle, h100(["quantacloud"]))
    await reaches(client, handle, plain, "running", seconds=10)
    assert (await order(client, handle, imaged))["status"] == "waiting"

    await sim.stock(*QUANTA_H100, 1)
    await sim.stock(*VERDA_H100, 1)  # dearer, but it boots the image
    running = await reaches(client, handle, imaged, "running", seconds=10)
    assert running["deployment"]["provider"] == "verda"
    assert len(await sim.creates("quantacloud")) == 1
    (verda_create,) = await sim.creates("verda")
    assert verda_create["image"] == VERDA_CUDA13


HYPER_DEFAULT = "Ubuntu Server 22.04 LTS R535 CUDA 12.2"  # the configured image (the default)
HYPER_B200_X8 = ("hyperstack", "n3-B200-SXM6x8", "CANADA-1")  # $38.00/h
VERDA_A6000 = ("verda", "1A6000.10V", "FIN-01")  # $0.79/h


async def driver_of(sim: SimControl, provider: str, image: str) -> int | None:
    """The driver branch of an image, as the simulator says (`/_sim/images`)."""
    key = "image_type" if provider == "verda" else "name"
    found: int | None = next(i["driver"] for i in await sim.images(provider) if i[key] == image)
    return found


async def test_each_machine_boots_an_image_it_runs_and_the_timeline_says_which(
    client: httpx.AsyncClient, sim: SimControl
) -> None:
    handle = await create_account(client, credit="200")
    await lists_read(client, handle)
    # Hyperstack's configured image has an R535 driver, which cannot drive a B200.
    body = h100(["hyperstack"], gpu_model="B200", gpu_count=8, max_price_per_hour="45")
    b200 = await place(client, handle, body)
    await sim.stock(*HYPER_B200_X8, 1)
    await reaches(client, handle, b200, "running", seconds=10)
    (create,) = await sim.creates("hyperstack")
    assert create["outcome"] == "created" and create["image"] != HYPER_DEFAULT
    assert (await driver_of(sim, "hyperstack", create["image"]) or 0) >= 570
    said = (await client.get(f"/v1/orders/{b200}/events", headers=handle.headers)).json()
    assert any(
        f"Boots {create['image']}: the configured {HYPER_DEFAULT} does not run 8x B200 there."
        in line["message"]
        for line in said
    ), said
    # Verda's RTX A6000 lists no open-driver image (the configured one is): it boots the
    # newest it lists, where Verda would refuse the configured one.
    a6000 = await place(client, handle, h100(["verda"], gpu_model="RTX-A6000"))
    await sim.stock(*VERDA_A6000, 1)
    await reaches(client, handle, a6000, "running", seconds=10)
    (create,) = await sim.creates("verda")
    assert (create["outcome"], create["image"]) == ("created", "ubuntu-22.04-cuda-12.4-docker")
    # Positive control: where the configured image runs, it is the one booted.
    plain = await place(client, handle, h100(["hyperstack"]))
    await sim.stock(*HYPER_H100, 1)
    await reaches(client, handle, plain, "running", seconds=10)
    assert (await sim.creates("hyperstack"))[-1]["image"] == HYPER_DEFAULT
