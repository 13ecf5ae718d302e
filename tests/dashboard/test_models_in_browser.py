"""Ordering by model in the browser: the order form's model picker shows the shapes the order
takes (the API's preview), each with its cache room and expected wait, and the script an engine
writes; placing sends the order by model."""

import re
from typing import Any

from playwright.sync_api import Page, expect

from tests.dashboard.pages import sign_in
from tests.dashboard.service import Api

KIMI = "moonshotai/Kimi-K3"


def choose_kimi_at_verda(page: Page, price: str = "70.00") -> None:
    """Order by model: Kimi K3 at Verda, up to `price` an hour."""
    page.get_by_label("A model to run").check()
    page.get_by_label("Model", exact=True).select_option(KIMI)
    page.get_by_label("Verda").check()
    page.get_by_label("Max price per hour (USD, incl. fees)").fill(price)


def placed_order(page: Page, api: Api, name: str) -> dict[str, Any]:
    """The order the form placed under `name`, as the API shows it."""
    placed = page.locator("tr[data-order-id]", has_text=name)
    expect(placed).to_have_count(1)
    order_id = placed.get_attribute("data-order-id")
    assert order_id
    return api.order(order_id)


def test_kimi_k3_by_model_shows_the_shapes_it_takes_with_their_waits_and_places_it(
    page: Page, api: Api
) -> None:
    sign_in(page, api.key)
    page.get_by_label("A model to run").check()
    expect(page.get_by_label("GPU model")).to_be_hidden()  # the model chooses the machine
    expect(page.get_by_label("GPU count")).to_be_hidden()
    page.get_by_label("Model", exact=True).select_option(KIMI)
    expect(page.get_by_text("Choose providers and a max price")).to_be_visible()
    page.get_by_label("Verda").check()
    page.get_by_label("Max price per hour (USD, incl. fees)").fill("70.00")

    shapes = page.get_by_test_id("model-shapes")
    rows = shapes.locator("tbody tr")
    expect(rows.locator("td:first-child")).to_have_text(["8x B300", "2 x 8x B200", "2 x 8x H200"])
    expect(shapes.locator('tr[data-shape="H200/8/1"]')).to_have_count(0)  # 1,128 GB: too small
    b300 = shapes.locator('tr[data-shape="B300/8/1"]')
    h200 = shapes.locator('tr[data-shape="H200/8/2"]')
    expect(b300.locator('[data-label="Cache room"]')).to_have_text("371 GB")  # the fit rule's
    expect(h200.locator('[data-label="Cache room"]')).to_have_text("514 GB")
    expect(h200.locator('[data-label="Providers"]')).to_have_text("Verda")
    expect(h200.locator('[data-label="Max price"]')).to_have_text("$70.00/h")
    # Each shape's own expected wait (this service has no stock history yet: it says so).
    waits = shapes.get_by_test_id("wait")
    expect(waits).to_have_count(3)
    for i in range(3):
        expect(waits.nth(i)).to_contain_text("Last 7 days at or under $70.00/h: ")

    page.get_by_label("Name").fill("kimi by model")
    page.get_by_role("button", name="Place order").click()
    order = placed_order(page, api, "kimi by model")
    assert order["model"] == KIMI
    assert [
        (a["gpu_model"], a["gpu_count"], a["nodes"], a["providers"], a["max_price_per_hour"])
        for a in order["alternatives"]
    ] == [
        ("B300", 8, 1, ["verda"], "70.00"),
        ("B200", 8, 2, ["verda"], "70.00"),
        ("H200", 8, 2, ["verda"], "70.00"),
    ]
    assert order["serve_engine"] is None and order["startup_script_bytes"] is None
    expect(page.locator("tr[data-order-id]", has_text="kimi by model")).to_contain_text(
        "8x B300 (or 2 more)"
    )
    expect(page.get_by_label("GPU model")).to_be_visible()  # the form is reset to a shape


def test_an_engine_shows_the_script_the_machine_will_run_and_the_order_serves_it(
    page: Page, api: Api
) -> None:
    sign_in(page, api.key)
    choose_kimi_at_verda(page)
    expect(page.get_by_test_id("model-shapes").locator("tbody tr")).to_have_count(3)
    generated = page.get_by_label("Generated boot script")
    expect(generated).to_be_hidden()
    expect(page.get_by_label("Start-up script")).to_be_visible()

    page.get_by_label("Serve on boot").select_option("sglang")
    expect(generated).to_have_value(re.compile("sglang"))
    page.get_by_label("Serve on boot").select_option("vllm")
    expect(generated).to_have_value(re.compile(r"vllm/vllm-openai:kimi-k3"))
    expect(generated).not_to_be_editable()  # read to know what runs, not changed here
    expect(page.get_by_label("Start-up script")).to_be_hidden()  # the engine writes it
    preview = api.client.post(
        "/v1/orders/preview",
        json={
            "model": KIMI,
            "providers": ["verda"],
            "max_price_per_hour": "70.00",
            "serve": {"engine": "vllm"},
        },
        headers=api.headers,
    ).json()
    script = preview["startup_script"]
    assert generated.input_value() == script  # exactly what the API will send the machine

    page.get_by_label("Name").fill("kimi served")
    page.get_by_role("button", name="Place order").click()
    order = placed_order(page, api, "kimi served")
    assert (order["model"], order["serve_engine"]) == (KIMI, "vllm")
    assert order["startup_script_bytes"] == len(script.encode())
    page.goto(f"/#/orders/{order['id']}")  # its page names the model and the engine
    expect(page.get_by_test_id("model")).to_have_text(f"{KIMI}, served with vllm")


def test_a_model_no_shape_holds_says_why_and_placing_marks_the_model(page: Page, api: Api) -> None:
    sign_in(page, api.key)
    choose_kimi_at_verda(page)
    expect(page.get_by_test_id("model-shapes").locator("tbody tr")).to_have_count(3)
    page.get_by_label("Min cache room (GB)").fill("90000")
    said = page.get_by_text("No shape to show")
    expect(said).to_contain_text("holds Kimi K3 with 90000 GB for the cache")
    expect(page.get_by_test_id("model-shapes")).to_be_hidden()

    page.get_by_role("button", name="Place order").click()
    error = page.locator("#error-model")
    expect(error).to_contain_text("holds Kimi K3 with 90000 GB for the cache")
    expect(page.get_by_label("Model", exact=True)).to_have_attribute("aria-invalid", "true")
    assert api.client.get("/v1/orders", headers=api.headers).json()["data"] == []
