"""Clusters in the browser: the order form's nodes and cluster fields, what it sends (and what the
expected wait asks), and a running cluster's page with its login IP and its nodes."""

import json
from collections.abc import Callable
from typing import Any

from playwright.sync_api import Page, Request, expect

from app.simulators.control import SimControlSync
from tests.dashboard.pages import SLOW, row, sign_in
from tests.dashboard.service import Api

VERDA_16H200 = ("verda", "16H200", "FIN-01")  # a cluster of 2 nodes of 8x H200: $54.24/h


def estimate(**fields: Any) -> Callable[[Request], bool]:
    """Whether a request is the order form's expected wait, asked with these fields."""

    def asked(request: Request) -> bool:
        if request.method != "POST" or not request.url.endswith("/v1/stock/estimate"):
            return False
        body = json.loads(request.post_data or "{}")
        return all(body.get(name) == value for name, value in fields.items())

    return asked


def test_a_two_node_order_placed_in_the_form_sends_its_cluster_fields(page: Page, api: Api) -> None:
    sign_in(page, api.key)
    fabric, lost = page.get_by_label("Cluster interconnect"), page.get_by_label("If a node is lost")
    expect(fabric).to_be_disabled()  # one machine: no cluster to ask anything of
    expect(lost).to_be_disabled()
    page.get_by_label("GPU model").select_option("H200")
    page.get_by_label("GPU count").fill("8")
    page.get_by_label("Verda").check()
    with page.expect_request(estimate(nodes=1)):
        page.get_by_label("Max price per hour (USD, incl. fees)").fill("70.00")
    nodes = page.get_by_label("Nodes")
    expect(nodes).to_have_value("1")
    expect(page.locator("#hint-nodes")).to_contain_text("the max price is for the whole cluster")
    with page.expect_request(estimate(nodes=2, cluster_interconnect="infiniband")):
        nodes.fill("2")
        expect(fabric).to_be_enabled()
        expect(lost).to_be_enabled()
        fabric.select_option("infiniband")
        lost.select_option("terminate")
    page.get_by_label("Name").fill("two nodes")
    page.get_by_role("button", name="Place order").click()

    placed = page.locator("tr[data-order-id]", has_text="two nodes")
    expect(placed.locator('[data-field="gpu"]')).to_have_text("2 x 8x H200")
    order_id = placed.get_attribute("data-order-id")
    assert order_id
    order = api.order(order_id)
    assert (order["nodes"], order["cluster_interconnect"], order["on_node_lost"]) == (
        2,
        "infiniband",
        "terminate",
    )
    assert order["max_price_per_hour"] == "70.00"
    expect(fabric).to_be_disabled()  # the form is reset to one machine

    placed.get_by_role("link").click()
    fields = page.get_by_role("region", name="Order", exact=True)
    expect(fields).to_contain_text("2 x 8x H200")
    expect(fields).to_contain_text("terminate the cluster")
    expect(page.get_by_text("No machine yet")).to_be_visible()


def test_a_single_machine_sends_no_cluster_fields(page: Page, api: Api) -> None:
    sign_in(page, api.key)
    page.get_by_label("GPU model").select_option("H100")
    page.get_by_label("GPU count").fill("1")
    page.get_by_label("Nodes").fill("2")
    page.get_by_label("Cluster interconnect").select_option("infiniband")
    page.get_by_label("Nodes").fill("1")  # back to one machine: the fabric no longer counts
    page.get_by_label("Hyperstack").check()
    page.get_by_label("Max price per hour (USD, incl. fees)").fill("3.00")
    page.get_by_label("Name").fill("one machine")
    page.get_by_role("button", name="Place order").click()
    placed = page.locator("tr[data-order-id]", has_text="one machine")
    expect(placed.locator('[data-field="gpu"]')).to_have_text("1x H100")
    order_id = placed.get_attribute("data-order-id")
    assert order_id
    order = api.order(order_id)
    assert (order["nodes"], order["cluster_interconnect"], order["on_node_lost"]) == (
        1,
        None,
        "keep",
    )


def test_a_running_clusters_page_shows_its_login_ip_and_its_nodes(
    page: Page, service: str, sim_sync: SimControlSync
) -> None:
    rich = Api(service, credit="200")
    order = rich.place(
        gpu_model="H200",
        gpu_count=8,
        nodes=2,
        providers=["verda"],
        max_price_per_hour="70.00",
        name="cluster",
    )
    sign_in(page, rich.key)
    sim_sync.stock(*VERDA_16H200, 1)
    status = row(page, order["id"]).locator('[data-field="status"]')
    expect(status).to_have_text("running", timeout=SLOW)
    running = rich.order(order["id"])
    login = running["login_ip"]
    assert login and len(running["machines"]) == 2
    expect(row(page, order["id"])).to_contain_text(f"login {login}")
    expect(row(page, order["id"]).locator('[data-field="gpu"]')).to_have_text("2 x 8x H200")

    row(page, order["id"]).get_by_role("link").click()
    expect(page.get_by_test_id("login-ip")).to_have_text(login)
    machines = page.get_by_test_id("machines")
    expect(machines.locator("caption")).to_have_text("Nodes (2)")
    expect(machines.locator("tbody tr")).to_have_count(2)
    for machine in running["machines"]:
        line = machines.locator("tbody tr", has_text=machine["provider_vm_id"])
        expect(line).to_contain_text(machine["ip"])
        expect(line).to_contain_text("running")
    rich.client.close()


def test_an_order_with_alternatives_shows_them_and_which_one_deployed(
    page: Page, service: str, sim_sync: SimControlSync
) -> None:
    rich = Api(service, credit="200")
    order = rich.place(
        alternatives=[
            {"gpu_model": "B300", "gpu_count": 8, "providers": ["verda"],
             "max_price_per_hour": "55.00"},
            {"gpu_model": "H200", "gpu_count": 8, "nodes": 2, "providers": ["verda"],
             "max_price_per_hour": "70.00"},
        ],
        name="kimi",
    )  # fmt: skip
    sign_in(page, rich.key)
    expect(row(page, order["id"]).locator('[data-field="gpu"]')).to_have_text("8x B300 (or 1 more)")
    sim_sync.stock(*VERDA_16H200, 1)
    status = row(page, order["id"]).locator('[data-field="status"]')
    expect(status).to_have_text("running", timeout=SLOW)
    row(page, order["id"]).get_by_role("link").click()
    listed = page.get_by_test_id("alternatives").locator("li")
    expect(listed).to_have_text(
        ["8x B300 on Verda, up to $55.00/h", "2 x 8x H200 on Verda, up to $70.00/h"]
    )
    expect(page.get_by_test_id("alternatives")).to_contain_text("the cheapest that shows")
    expect(page.get_by_test_id("alternative")).to_have_text(
        "2: 2 x 8x H200 on Verda, up to $70.00/h"
    )
