"""Alternatives in the browser: the order form's "Add alternative" adds machine shapes the order
may take instead of its own, each with its expected wait, and "Prefer" once there are two; what
the form sends, and where a shape's error shows."""

import json
from collections.abc import Callable
from typing import Any

from playwright.sync_api import Locator, Page, Request, expect

from tests.dashboard.pages import sign_in
from tests.dashboard.service import Api


def estimate(**fields: Any) -> Callable[[Request], bool]:
    """Whether a request is an expected wait asked with these fields."""

    def asked(request: Request) -> bool:
        if request.method != "POST" or not request.url.endswith("/v1/stock/estimate"):
            return False
        body = json.loads(request.post_data or "{}")
        return all(body.get(name) == value for name, value in fields.items())

    return asked


def placing(request: Request) -> bool:
    return request.method == "POST" and request.url.endswith("/v1/orders")


def fill_b300(page: Page, name: str) -> None:
    """The form's own shape: one 8x B300 at Verda up to $55.00/h."""
    page.get_by_label("GPU model").select_option("B300")
    page.get_by_label("GPU count").fill("8")
    page.get_by_label("Verda").check()
    page.get_by_label("Max price per hour (USD, incl. fees)").fill("55.00")
    page.get_by_label("Name").fill(name)


def add_alternative(page: Page, n: int) -> Locator:
    page.get_by_role("button", name="Add alternative").click()
    return page.get_by_role("group", name=f"Alternative {n}")


def test_a_second_shape_is_placed_as_alternatives_with_prefer_and_each_shows_its_wait(
    page: Page, api: Api
) -> None:
    sign_in(page, api.key)
    fill_b300(page, "b300 or h200s")
    expect(page.get_by_test_id("estimate")).to_contain_text("Last 7 days at or under $55.00/h")
    expect(page.get_by_label("Prefer")).to_be_hidden()  # one shape: nothing to prefer

    second = add_alternative(page, 2)
    expect(page.get_by_label("Prefer")).to_be_visible()
    second.get_by_label("GPU model").select_option("H200")
    second.get_by_label("GPU count").fill("8")
    second.get_by_label("Nodes").fill("2")
    second.get_by_label("Verda").check()
    with page.expect_request(estimate(gpu_model="H200", gpu_count=8, nodes=2, providers=["verda"])):
        second.get_by_label("Max price per hour (USD, incl. fees)").fill("70.00")
    expect(second.get_by_test_id("alternative-wait")).to_contain_text(
        "Last 7 days at or under $70.00/h: "
    )
    expect(page.get_by_test_id("estimate")).to_contain_text("at or under $55.00/h")  # the first's
    page.get_by_label("Prefer").select_option("listed")

    with page.expect_request(placing) as sent:
        page.get_by_role("button", name="Place order").click()
    body = json.loads(sent.value.post_data or "{}")
    assert "gpu_model" not in body and body["prefer"] == "listed"
    placed = page.locator("tr[data-order-id]", has_text="b300 or h200s")
    expect(placed.locator('[data-field="gpu"]')).to_have_text("8x B300 (or 1 more)")
    order_id = placed.get_attribute("data-order-id")
    assert order_id
    order = api.order(order_id)
    assert [
        (a["gpu_model"], a["gpu_count"], a["nodes"], a["providers"], a["max_price_per_hour"])
        for a in order["alternatives"]
    ] == [("B300", 8, 1, ["verda"], "55.00"), ("H200", 8, 2, ["verda"], "70.00")]
    assert order["prefer"] == "listed"
    expect(page.get_by_role("group", name="Alternative 2")).to_have_count(0)  # the form is reset


def test_up_to_eight_shapes_and_one_left_is_sent_as_todays_single_shape(
    page: Page, api: Api
) -> None:
    sign_in(page, api.key)
    fill_b300(page, "just one")
    add = page.get_by_role("button", name="Add alternative")
    for n in range(2, 9):
        add_alternative(page, n).get_by_label("GPU model").select_option("H200")
    expect(add).to_be_disabled()
    expect(page.get_by_text("An order takes at most 8 shapes.")).to_be_visible()

    page.get_by_role("button", name="Remove alternative 3").click()
    expect(add).to_be_enabled()
    expect(add).to_be_focused()
    legends = page.locator(".alt-row > legend")
    expect(legends).to_have_text([f"Alternative {n}" for n in range(2, 8)])
    while legends.count():
        page.get_by_role("button", name="Remove alternative 2").click()
    expect(page.get_by_label("Prefer")).to_be_hidden()

    with page.expect_request(placing) as sent:
        page.get_by_role("button", name="Place order").click()
    assert json.loads(sent.value.post_data or "{}") == {
        "gpu_model": "B300",
        "gpu_count": 8,
        "providers": ["verda"],
        "max_price_per_hour": "55.00",
        "name": "just one",
    }
    expect(page.locator("tr[data-order-id]", has_text="just one")).to_have_count(1)


def test_a_bad_price_in_the_second_shape_shows_next_to_that_field(page: Page, api: Api) -> None:
    sign_in(page, api.key)
    fill_b300(page, "fix my price")
    second = add_alternative(page, 2)
    second.get_by_label("GPU model").select_option("H200")
    second.get_by_label("GPU count").fill("8")
    second.get_by_label("Verda").check()
    price = second.get_by_label("Max price per hour (USD, incl. fees)")
    price.fill("12.345")
    page.get_by_role("button", name="Place order").click()

    slot = price.get_attribute("aria-describedby")
    assert slot
    error = page.locator(f'[id="{slot}"]')
    expect(error).to_have_text("Enter an amount in USD with at most two decimals, e.g. 46.50.")
    expect(price).to_have_attribute("aria-invalid", "true")
    expect(second.locator(".field-error:not(:empty)")).to_have_count(1)
    expect(page.locator("#error-max_price_per_hour")).to_be_empty()  # the first shape's is fine
    assert api.client.get("/v1/orders", headers=api.headers).json()["data"] == []

    price.fill("60.00")
    expect(error).to_be_empty()
    expect(price).not_to_have_attribute("aria-invalid", "true")
    page.get_by_role("button", name="Place order").click()
    placed = page.locator("tr[data-order-id]", has_text="fix my price")
    expect(placed).to_have_count(1)
    order_id = placed.get_attribute("data-order-id")
    assert order_id
    assert [a["max_price_per_hour"] for a in api.order(order_id)["alternatives"]] == [
        "55.00",
        "60.00",
    ]
