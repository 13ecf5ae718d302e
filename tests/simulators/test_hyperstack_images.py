"""The simulated Hyperstack's OS images over raw HTTP: the Blackwell flavors' `image_restrictions`
and the old images' `flavor_restrictions` (the official SDK's shapes), the create that names an
image its flavor refuses, and `/_sim/images`, which says each image's driver and GPUs."""

from typing import Any

import httpx

from app.simulators.hyperstack import HyperstackSimulator, build_app
from tests.fixtures.simulators import in_process

KEY = {"api_key": "sim-key"}
R535 = "Ubuntu Server 22.04 LTS R535 CUDA 12.2"
R570 = "Ubuntu Server 24.04 LTS R570 CUDA 12.8"
R580 = "Ubuntu Server 24.04 LTS R580 CUDA 13.0 with Docker"

sim, client = in_process(HyperstackSimulator, build_app)


async def flavor(client: httpx.AsyncClient, name: str, region: str) -> dict[str, Any]:
    body = (await client.get("/v1/core/flavors", params={"region": region}, headers=KEY)).json()
    rows = [f for group in body["data"] for f in group["flavors"]]
    found: dict[str, Any] = next(f for f in rows if f["name"] == name)
    return found


async def images(client: httpx.AsyncClient, region: str) -> dict[str, dict[str, Any]]:
    body = (await client.get("/v1/core/images", params={"region": region}, headers=KEY)).json()
    return {i["name"]: i for group in body["images"] for i in group["images"]}


async def create(client: httpx.AsyncClient, flavor: str, image: str) -> httpx.Response:
    await client.put("/_sim/stock", json={"sku": flavor, "region": "CANADA-1", "quantity": 1})
    body = {
        "name": "ap-01jd3x-1",
        "environment_name": "default-CANADA-1",
        "flavor_name": flavor,
        "key_name": "autoprovision",
        "image_name": image,
        "count": 1,
        "assign_floating_ip": True,
    }
    return await client.post("/v1/core/virtual-machines", json=body, headers=KEY)


async def test_a_blackwell_flavor_takes_only_images_with_a_driver_for_it(
    client: httpx.AsyncClient,
) -> None:
    b200 = await flavor(client, "n3-B200-SXM6x8", "CANADA-1")
    restrictions = b200["image_restrictions"]
    assert (restrictions["has_image_restrictions"], restrictions["restriction_type"]) == (
        True,
        "hard",
    )
    named = {i["image_name"] for i in restrictions["compatible_images"]}
    assert R570 in named and R580 in named and R535 not in named
    by_name = await images(client, "CANADA-1")
    assert {i["image_id"] for i in restrictions["compatible_images"]} == {
        by_name[n]["id"] for n in named
    }
    # The default R535 image says the same from its side: a Blackwell flavor is not among
    # the flavors it may launch on; an H100 is.
    allowed = {f["flavor_name"] for f in by_name[R535]["flavor_restrictions"]["compatible_flavors"]}
    assert "n3-B200-SXM6x8" not in allowed and "n3-H100x1" in allowed
    # Positive control: an H100 flavor has no restrictions, and the R580 image none either.
    assert (await flavor(client, "n3-H100x1", "CANADA-1"))["image_restrictions"] is None
    assert by_name[R580]["flavor_restrictions"] == {}


async def test_a_create_naming_an_image_its_flavor_refuses_is_a_400(
    client: httpx.AsyncClient, sim: HyperstackSimulator
) -> None:
    refused = await create(client, "n3-B200-SXM6x8", R535)
    assert refused.status_code == 400
    assert refused.json() == {
        "status": False,
        "message": f"Image {R535} is not compatible with flavor n3-B200-SXM6x8",
        "error_reason": "bad_request",
    }
    assert [c.outcome for c in sim.creates] == ["rejected"]
    # Positive controls: the same flavor with an R570 image, and the R535 image on an H100.
    assert (await create(client, "n3-B200-SXM6x8", R570)).status_code == 200
    assert (await create(client, "n3-H100x1", R535)).status_code == 200


async def test_the_control_api_says_each_images_driver_and_gpus(client: httpx.AsyncClient) -> None:
    shown = {i["name"]: i for i in (await client.get("/_sim/images")).json()}
    assert shown[R535]["driver"] == 535 and shown[R580]["driver"] == 580
    assert "B200" not in shown[R535]["gpus"] and "H100" in shown[R535]["gpus"]
    assert {"B200", "B300", "RTX-PRO-6000", "H100"} <= set(shown[R570]["gpus"])
    assert "n3-B300-SXM6x8" in shown[R580]["flavors"]
