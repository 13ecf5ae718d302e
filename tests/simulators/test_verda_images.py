"""The simulated Verda's OS images over raw HTTP: the ids clients hard-code, what each instance
and cluster type lists (`?instance_type=`), the create that names an image its type does not
list refused as Verda refuses it, and `/_sim/images`, which says each image's driver."""

import uuid
from typing import Any

import httpx
import pytest

from app.providers.verda.spec import VerdaSettings
from app.simulators.verda import VerdaSimulator, build_app
from tests.fixtures.simulators import in_process

CUDA_13 = "2404f580-1300-1111-82b3-f199fb9b701b"
CUDA_12_0 = "2088da25-bb0d-41cc-a191-dccae45d96fd"
CUDA_12_8 = "77777777-4f48-4249-82b3-f199fb9b701b"
OUR_DEFAULT: str = VerdaSettings.model_fields["image"].default  # the adapter's configured image
B300 = ("8B300.240V", "FIN-03")
A6000 = ("1A6000.10V", "FIN-01")
B200_CLUSTER = ("16B200", "FIN-01")
NOT_VALID = "Operating system is not valid for this instance type"

sim, api = in_process(VerdaSimulator, build_app)


@pytest.fixture
async def client(api: httpx.AsyncClient) -> httpx.AsyncClient:
    """The simulated Verda's API, with a bearer token."""
    body = {"grant_type": "client_credentials", "client_id": "sim-client"}
    token = await api.post("/v1/oauth2/token", json={**body, "client_secret": "sim-secret"})
    api.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
    return api


async def create(
    client: httpx.AsyncClient, where: tuple[str, str] = B300, **overrides: Any
) -> httpx.Response:
    await client.put("/_sim/stock", json={"sku": where[0], "region": where[1], "quantity": 1})
    body: dict[str, Any] = {"instance_type": where[0], "image": CUDA_13, "hostname": "ap-1"}
    return await client.post("/v1/instances", json={**body, "location_code": where[1], **overrides})


async def listed(client: httpx.AsyncClient, path: str, instance_type: str) -> list[str]:
    answer = await client.get(path, params={"instance_type": instance_type})
    assert answer.status_code == 200, answer.text
    return [image["image_type"] for image in answer.json()]


async def drivers(client: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    """`/_sim/images` by image type."""
    return {i["image_type"]: i for i in (await client.get("/_sim/images")).json()}


def refused(response: httpx.Response, message: str) -> bool:
    return response.status_code == 400 and response.json() == {
        "code": "invalid_request",
        "message": message,
    }


async def test_images_carry_the_ids_clients_hard_code(client: httpx.AsyncClient) -> None:
    images = {i["id"]: i for i in (await client.get("/v1/images")).json()}
    assert images[CUDA_13]["image_type"] == "ubuntu-24.04-cuda-13.0-open-docker"
    assert images[CUDA_13]["name"] == "Ubuntu 24.04 + CUDA 13.0 Open + Docker"
    assert images[CUDA_12_0]["name"] == "Ubuntu 22.04 + CUDA 12.0 + Docker"
    assert images[CUDA_12_8]["is_default"] is True
    assert [i["image_type"] for i in images.values() if i["is_default"]] == [OUR_DEFAULT]


@pytest.mark.parametrize(
    ("image", "image_type", "where"),
    [
        (CUDA_13, "ubuntu-24.04-cuda-13.0-open-docker", B300),
        (CUDA_12_0, "ubuntu-22.04-cuda-12.0-docker", A6000),
        ("ubuntu-22.04-cuda-12.0-docker", "ubuntu-22.04-cuda-12.0-docker", A6000),
        (OUR_DEFAULT, OUR_DEFAULT, B300),
    ],
)
async def test_a_create_names_its_image_by_id_or_by_type(
    client: httpx.AsyncClient, image: str, image_type: str, where: tuple[str, str]
) -> None:
    made = await create(client, where, image=image)
    assert made.status_code == 202, made.text
    assert (await client.get(f"/v1/instances/{made.text}")).json()["image"] == image_type


async def test_an_unknown_image_is_refused(client: httpx.AsyncClient) -> None:
    for image in (str(uuid.uuid4()), "Ubuntu 24.04 + CUDA 13.0 Open + Docker"):
        assert refused(await create(client, image=image), "Invalid image")


async def test_a_type_lists_only_the_images_it_boots(client: httpx.AsyncClient) -> None:
    shown = await drivers(client)
    every = [i["image_type"] for i in (await client.get("/v1/images")).json()]
    # Blackwell: nothing older than R570 (the minimal image says no driver and stays).
    b300 = await listed(client, "/v1/images", B300[0])
    assert b300 and all(shown[i]["driver"] is None or shown[i]["driver"] >= 570 for i in b300)
    assert "ubuntu-22.04-cuda-12.0-docker" not in b300
    # The open-driver images are not for V100 nor RTX A6000 (what dstack saw refused).
    for sku in ("1V100.6V", A6000[0]):
        assert not [i for i in await listed(client, "/v1/images", sku) if "-open-" in i]
    # Positive control: an H100 boots every one; a CPU type too; the listing without a type
    # is every instance image; an unknown type is the document's 404.
    assert await listed(client, "/v1/images", "8H100.80S.176V") == every
    assert await listed(client, "/v1/images", "CPU.4V.16G") == every
    unknown = await client.get("/v1/images", params={"instance_type": "9X999.1V"})
    assert unknown.status_code == 404 and unknown.json()["code"] == "not_found"


async def test_a_create_with_an_image_its_type_does_not_list_is_refused(
    client: httpx.AsyncClient, sim: VerdaSimulator
) -> None:
    assert refused(await create(client, B300, image=CUDA_12_0), NOT_VALID)
    assert refused(await create(client, A6000, image=OUR_DEFAULT), NOT_VALID)
    assert [c.outcome for c in sim.creates] == ["rejected", "rejected"]
    # Positive control: the same types with an image they list.
    assert (await create(client, B300, image=OUR_DEFAULT)).status_code == 202
    assert (await create(client, A6000, image=CUDA_12_0)).status_code == 202


async def test_cluster_types_list_their_images_and_refuse_the_others(
    client: httpx.AsyncClient,
) -> None:
    assert await listed(client, "/v1/images/cluster", B200_CLUSTER[0]) == [
        "ubuntu-24.04-cuda-13.0-cluster"
    ]
    assert await listed(client, "/v1/images/cluster", "16H200") == [
        "ubuntu-24.04-cuda-13.0-cluster",
        "ubuntu-22.04-cuda-12.4-cluster",
    ]
    unknown = await client.get("/v1/images/cluster", params={"instance_type": B300[0]})
    assert unknown.status_code == 404
    await client.put(
        "/_sim/stock", json={"sku": B200_CLUSTER[0], "region": B200_CLUSTER[1], "quantity": 2}
    )
    body = {
        "hostname": "ap-1",
        "cluster_type": B200_CLUSTER[0],
        "location_code": B200_CLUSTER[1],
        "shared_volume": {"name": "ap-1-home", "size": 100},
    }
    old = await client.post(
        "/v1/clusters", json={**body, "image": "ubuntu-22.04-cuda-12.4-cluster"}
    )
    assert refused(old, NOT_VALID)
    new = await client.post(
        "/v1/clusters", json={**body, "image": "ubuntu-24.04-cuda-13.0-cluster"}
    )
    assert new.status_code == 202, new.text


async def test_the_control_api_says_each_images_driver_and_gpus(client: httpx.AsyncClient) -> None:
    shown = await drivers(client)
    default = shown[OUR_DEFAULT]
    assert default["driver"] == 570 and not default["cluster"]
    assert "B300" in default["gpus"] and "V100" not in default["gpus"]
    assert shown["ubuntu-24.04-cuda-13.0-open-docker"]["driver"] == 580
    assert shown["ubuntu-22.04-cuda-12.0-docker"]["driver"] == 525  # its details do not say
    assert "B200" not in shown["ubuntu-22.04-cuda-12.0-docker"]["gpus"]
    assert shown["ubuntu-24.04"]["driver"] is None  # the minimal image has none
    assert shown["ubuntu-22.04-cuda-12.4-cluster"]["instance_types"] == ["16H200", "32H200"]
    # What a type lists is what the control API says runs on it (each type read once: Verda
    # counts 60 requests a minute per path).
    for cluster in (False, True):
        said: dict[str, set[str]] = {}
        for image_type, image in shown.items():
            if image["cluster"] == cluster:
                for sku in image["instance_types"]:
                    said.setdefault(sku, set()).add(image_type)
        path = "/v1/images/cluster" if cluster else "/v1/images"
        for sku, images in said.items():
            assert set(await listed(client, path, sku)) == images
