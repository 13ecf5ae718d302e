"""Placing an order against what each provider's image lists say runs which machine (kept by the
watcher, written here as it would): an image that cannot drive the machine's GPU, or that the
machine's own list leaves out, or one older than the R580 an order's serve script needs, is a
422 naming `image`, or that alternative is left out and said on its timeline; an order serving
a model where no machine it takes has an R580 image is a 422 naming `serve`. Both databases."""

from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.clock import utcnow
from app.providers.base import Image, ImageFit, Images, MachineKey
from app.services import images
from app.storage.db import create_sessionmaker, session_scope
from tests.factories import AccountHandle, create_account, order_body

R570 = "ubuntu-24.04-cuda-12.8-open-docker"  # the configured image
R580 = "ubuntu-24.04-cuda-13.0-open-docker"
R550 = "ubuntu-22.04-cuda-12.4-docker"
LISTED = (Image(R570, 570), Image(R580, 580), Image(R550, 550))
KIMI_CODE = "moonshotai/Kimi-K2.7-Code"


def fits(**machines: tuple[str, ...]) -> list[ImageFit]:
    """`B300x8=(...)`: what Verda's list for that machine holds."""
    found = []
    for key, names in machines.items():
        gpu, count = key.rsplit("x", 1)
        machine = MachineKey(gpu.replace("_", "-"), int(count))
        found.append(ImageFit(f"{count}{gpu}", machine, names, configured=R570))
    return found


async def keep_verda(engine: AsyncEngine, *read: ImageFit) -> None:
    """Verda's image lists as the watcher would have kept them."""
    async with session_scope(create_sessionmaker(engine)) as session:
        await images.keep(
            session, provider="verda", images=Images.of(LISTED, read), read_at=utcnow()
        )


async def refused(client: httpx.AsyncClient, account: AccountHandle, body: Any) -> dict[str, Any]:
    answer = await client.post("/v1/orders", json=body, headers=account.headers)
    assert answer.status_code == 422, answer.text
    (detail,) = answer.json()["error"]["details"]
    return dict(detail)


async def timeline(client: httpx.AsyncClient, account: AccountHandle, order_id: str) -> list[str]:
    lines = await client.get(f"/v1/orders/{order_id}/events", headers=account.headers)
    return [line["message"] for line in lines.json()]


async def test_an_image_too_old_for_the_gpu_is_a_422_naming_image(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    await keep_verda(engine)  # no list per machine: the GPU's need is known anyway
    account = await create_account(client)
    detail = await refused(client, account, order_body(providers=["verda"], image=R550))
    assert detail["field"] == "image"
    assert detail["message"] == (
        f"Verda: image '{R550}' has R550, which cannot drive B300 (R570 or newer): name an "
        "image that runs them, or leave image out"
    )
    # Positive control: an image with R570 is taken for the same machine.
    taken = await client.post(
        "/v1/orders", json=order_body(providers=["verda"], image=R570), headers=account.headers
    )
    assert taken.status_code == 201, taken.text


async def test_an_image_a_machines_list_leaves_out_takes_that_alternative_out_and_says_so(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    await keep_verda(engine, *fits(B300x8=(R570, R580), H200x8=(R570, R550)))
    account = await create_account(client)
    h200 = {"gpu_model": "H200", "gpu_count": 8, "providers": ["verda"], "max_price_per_hour": "40"}
    b300 = {**h200, "gpu_model": "B300"}
    placed = await client.post(
        "/v1/orders", json={"alternatives": [b300, h200], "image": R580}, headers=account.headers
    )
    assert placed.status_code == 201, placed.text
    assert [a["gpu_model"] for a in placed.json()["alternatives"]] == ["B300"]
    said = await timeline(client, account, placed.json()["id"])
    assert (
        f"Verda: image '{R580}' does not run 8x H200 there; this order does not deploy there "
        "for alternative 2 (8x H200)."
    ) in said
    # Alone, that machine is a 422; the image its list holds is taken (the positive control).
    detail = await refused(client, account, {**h200, "image": R580})
    assert detail["field"] == "image" and "does not run 8x H200 there" in detail["message"]
    taken = await client.post("/v1/orders", json={**h200, "image": R550}, headers=account.headers)
    assert taken.status_code == 201, taken.text


async def test_an_order_serving_a_model_names_no_image_older_than_r580(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    await keep_verda(engine)
    account = await create_account(client)
    body = {
        "model": KIMI_CODE,
        "providers": ["verda"],
        "max_price_per_hour": "40.00",
        "serve": {"engine": "vllm"},
    }
    detail = await refused(client, account, {**body, "image": R570})
    assert detail["field"] == "image"
    assert f"image '{R570}' has R570; the order's serve script needs R580" in detail["message"]
    # Positive control: the R580 image is taken.
    taken = await client.post("/v1/orders", json={**body, "image": R580}, headers=account.headers)
    assert taken.status_code == 201, taken.text


async def test_a_serving_order_takes_only_machines_with_an_r580_image(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    account = await create_account(client)
    body = {
        "model": KIMI_CODE,
        "providers": ["verda"],
        "max_price_per_hour": "40.00",
        "serve": {"engine": "vllm"},
    }
    preview = await client.post("/v1/orders/preview", json=body, headers=account.headers)
    shapes = [(a["gpu_model"], a["gpu_count"]) for a in preview.json()["alternatives"]]
    assert ("H200", 8) in shapes and len(shapes) > 1
    # H200's list has no R580 image: that alternative is left out, and said.
    no_r580 = {f"{gpu.replace('-', '_')}x{n}": (R570,) for gpu, n in shapes if gpu == "H200"}
    await keep_verda(engine, *fits(**no_r580))
    placed = await client.post("/v1/orders", json=body, headers=account.headers)
    assert placed.status_code == 201, placed.text
    kept = [(a["gpu_model"], a["gpu_count"]) for a in placed.json()["alternatives"]]
    assert kept == [s for s in shapes if s != ("H200", 8)]
    said = await timeline(client, account, placed.json()["id"])
    assert any(
        line.startswith("Verda: no image there runs 8x H200 with R580 or newer") for line in said
    ), said
    # No machine the order takes has one: a 422 naming serve.
    await keep_verda(engine, *fits(**{f"{g.replace('-', '_')}x{n}": (R570,) for g, n in shapes}))
    detail = await refused(client, account, body)
    assert detail["field"] == "serve"
    assert "the order cannot serve its model on these machines" in detail["message"]
