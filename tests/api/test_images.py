"""An order's `image` through the API: bad names are a 422 naming it, a good one is kept and
shown on every read, and the preview checks it as placing does."""

from typing import Any

import httpx
import pytest

from tests.factories import create_account, order_body

VERDA_IMAGE = "ubuntu-24.04-cuda-13.0-open-docker"


@pytest.mark.parametrize(
    ("image", "said"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ("ubuntu\n24.04", "must not contain control characters"),
        ("x" * 201, "must be at most 200 characters (201 given)"),
        (42, "Input should be a valid string"),
    ],
)
async def test_a_bad_image_is_a_422_naming_it(
    client: httpx.AsyncClient, image: Any, said: str
) -> None:
    account = await create_account(client)
    body = order_body(providers=["verda"], image=image)
    answer = await client.post("/v1/orders", json=body, headers=account.headers)
    assert answer.status_code == 422, answer.text
    (detail,) = answer.json()["error"]["details"]
    assert detail["field"] == "image" and said in detail["message"], detail
    assert (await client.get("/v1/orders", headers=account.headers)).json()["data"] == []


async def test_an_image_is_kept_and_shown_on_every_read(client: httpx.AsyncClient) -> None:
    account = await create_account(client)
    body = order_body(providers=["verda"], image=VERDA_IMAGE)
    placed = await client.post("/v1/orders", json=body, headers=account.headers)
    assert placed.status_code == 201, placed.text
    order_id = placed.json()["id"]
    got = (await client.get(f"/v1/orders/{order_id}", headers=account.headers)).json()
    listed = (await client.get("/v1/orders", headers=account.headers)).json()["data"]
    assert got["image"] == listed[0]["image"] == VERDA_IMAGE
    # Positive control: an order naming none shows null.
    plain = await client.post("/v1/orders", json=order_body(), headers=account.headers)
    assert plain.json()["image"] is None


async def test_the_preview_checks_the_image_as_placing_does(client: httpx.AsyncClient) -> None:
    account = await create_account(client)
    body = order_body(providers=["quantacloud"], image=VERDA_IMAGE)
    answer = await client.post("/v1/orders/preview", json=body, headers=account.headers)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["details"][0]["field"] == "image"
    body = order_body(providers=["verda"], image=VERDA_IMAGE)
    answer = await client.post("/v1/orders/preview", json=body, headers=account.headers)
    assert answer.status_code == 200, answer.text
