"""The dashboard in a real browser: sign in, place, watch, cancel, offers, account."""

import re
from datetime import datetime
from typing import Any

from playwright.sync_api import Page, expect

from app.simulators.control import SimControlSync
from tests.dashboard.pages import SLOW, row, sign_in
from tests.dashboard.service import Api, Service
from tests.fixtures.settings import ADMIN_KEY
from tests.waiting import eventually_sync

# $2.40/h and the public IP's $0.00672, $2.63 with the test fees
HYPER_H100 = ("hyperstack", "n3-H100x1", "CANADA-1")


def h100(**overrides: Any) -> dict[str, Any]:
    return {
        "gpu_model": "H100",
        "gpu_count": 1,
        "providers": ["hyperstack"],
        "max_price_per_hour": "3.00",
        **overrides,
    }


def test_a_wrong_key_is_refused_and_the_right_one_signs_in(page: Page, api: Api) -> None:
    page.goto("/")
    page.get_by_label("API key").fill("ap_live_not-a-real-key")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not accepted")
    page.get_by_label("API key").fill(api.key)
    page.get_by_label("API key").press("Enter")  # keyboard only
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    expect(page.get_by_text("No orders yet")).to_be_visible()


def test_an_order_placed_in_the_form_waits_then_deploys_and_runs_without_a_reload(
    page: Page, api: Api, sim_sync: SimControlSync
) -> None:
    sign_in(page, api.key)
    page.get_by_label("GPU model").select_option("H100")
    page.get_by_label("GPU count").fill("1")
    page.get_by_label("Hyperstack").check()
    page.get_by_label("Max price per hour (USD, incl. fees)").fill("3.00")
    page.get_by_label("Name").fill("browser test")
    page.get_by_role("button", name="Place order").click()

    placed = page.locator("tr[data-order-id]", has_text="browser test")
    expect(placed.locator('[data-field="status"]')).to_have_text("waiting")
    order_id = placed.get_attribute("data-order-id")
    assert order_id and api.order(order_id)["max_price_per_hour"] == "3.00"

    page.evaluate("window.__notReloaded = true")
    sim_sync.stock(*HYPER_H100, 1)
    status = row(page, order_id).locator('[data-field="status"]')
    expect(status).to_have_text("deployed", timeout=SLOW)
    expect(status).to_have_text("running", timeout=SLOW)
    expect(row(page, order_id)).to_contain_text("CANADA-1")
    expect(row(page, order_id)).to_contain_text("$2.63")
    assert page.evaluate("window.__notReloaded") is True

    row(page, order_id).get_by_role("link").click()
    timeline = page.get_by_test_id("timeline")
    expect(timeline).to_contain_text("create sent")
    expect(timeline).to_contain_text(re.compile(r"Running at \d+\.\d+\.\d+\.\d+"))


# Notes, in the page, when an order's status cell first shows `status` (epoch ms): the row may
# be rebuilt, so the whole table is watched.
WATCH_STATUS = """([orderId, status]) => {
  window.__notReloaded = true;
  window.__shownAt = null;
  const cell = () => document.querySelector(`tr[data-order-id="${orderId}"] [data-field="status"]`);
  new MutationObserver(() => {
    if (window.__shownAt === null && cell()?.textContent === status) window.__shownAt = Date.now();
  }).observe(document.body, { subtree: true, childList: true, characterData: true });
}"""


def test_with_the_event_stream_open_a_deploy_shows_within_a_second_without_a_reload(
    page: Page, api: Api, sim_sync: SimControlSync
) -> None:
    order = api.place(**h100(name="live"))
    sign_in(page, api.key)
    expect(page.locator("#live")).to_have_attribute("data-state", "live")
    status = row(page, order["id"]).locator('[data-field="status"]')
    expect(status).to_have_text("waiting")
    page.evaluate(WATCH_STATUS, [order["id"], "deployed"])
    sim_sync.stock(*HYPER_H100, 1)
    expect(status).to_have_text("deployed", timeout=SLOW)
    shown_at = page.evaluate("window.__shownAt") / 1000

    def deployed_event() -> list[dict[str, Any]]:
        # The page may show it before its line is published: a refresh for the `deploying`
        # event can already find the order deployed.
        events = api.client.get("/v1/events", headers=api.headers).json()["data"]
        return [e for e in events if e["type"] == "order.deployed"]

    (deployed,) = eventually_sync(deployed_event)
    happened_at = datetime.fromisoformat(deployed["timestamp"]).timestamp()
    # The fallback poll runs every 30 s while the stream is open: only the stream makes this.
    assert 0 <= shown_at - happened_at < 1.0, shown_at - happened_at
    assert page.evaluate("window.__notReloaded") is True
    expect(page.locator("#who")).to_contain_text("$97.37 available")


def test_with_the_stream_open_the_page_asks_nothing_between_events_yet_the_wait_counts(
    page: Page, api: Api
) -> None:
    first = api.place(**h100(name="quiet"))
    sign_in(page, api.key)
    expect(page.locator("#live")).to_have_attribute("data-state", "live")
    waited = row(page, first["id"]).locator('[data-field="waited"]')
    expect(waited).to_have_text(re.compile(r"^\d+ s$"))
    shown = waited.inner_text()
    expect(waited).not_to_have_text(shown)  # past the refreshes of signing in
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    shown = waited.inner_text()
    expect(waited).not_to_have_text(shown)  # the clock alone moves it
    assert [url for url in asked if "/v1/" in url] == []
    # The control: an event (another order placed elsewhere) makes the page ask at once.
    second = api.place(**h100(name="elsewhere"))
    expect(row(page, second["id"])).to_be_visible()
    assert any("/v1/orders" in url for url in asked)


def test_cancelling_asks_first_and_only_cancels_that_order(page: Page, api: Api) -> None:
    keep = api.place(**h100(name="keep me"))
    drop = api.place(**h100(name="drop me"))
    sign_in(page, api.key)
    row(page, drop["id"]).get_by_role("button", name="Cancel").click()
    page.get_by_role("button", name="Keep waiting").click()
    expect(row(page, drop["id"]).locator('[data-field="status"]')).to_have_text("waiting")

    row(page, drop["id"]).get_by_role("button", name="Cancel").click()
    page.get_by_role("button", name="Cancel order").click()
    expect(row(page, drop["id"]).locator('[data-field="status"]')).to_have_text("cancelled")
    expect(row(page, keep["id"]).locator('[data-field="status"]')).to_have_text("waiting")
    assert api.order(drop["id"])["status"] == "cancelled"
    assert api.order(keep["id"])["status"] == "waiting"


def test_a_bad_price_shows_the_apis_error_next_to_the_field(page: Page, api: Api) -> None:
    sign_in(page, api.key)
    page.get_by_label("GPU model").select_option("B300")
    page.get_by_label("GPU count").fill("8")
    page.get_by_label("Verda").check()
    price = page.get_by_label("Max price per hour (USD, incl. fees)")
    price.fill("12.345")
    page.get_by_role("button", name="Place order").click()
    error = page.locator("#error-max_price_per_hour")
    expect(error).to_contain_text("two decimals")
    expect(price).to_have_attribute("aria-invalid", "true")
    assert "error-max_price_per_hour" in (price.get_attribute("aria-describedby") or "")
    listed = api.client.get("/v1/orders", headers=api.headers).json()["data"]
    assert listed == []

    price.fill("45.50")
    page.get_by_role("button", name="Place order").click()
    expect(page.locator("tr[data-order-id]")).to_have_count(1)
    expect(error).to_be_empty()


def test_the_order_form_says_what_to_fix_and_clears_it_once_fixed(page: Page, api: Api) -> None:
    sign_in(page, api.key)
    form = page.locator(".order-form")
    page.get_by_role("button", name="Place order").click()  # nothing filled in
    model, providers = page.locator("#error-gpu_model"), page.locator("#error-providers")
    price_error = page.locator("#error-max_price_per_hour")
    expect(providers).to_have_text("Choose at least one provider.")
    expect(model).to_have_text("Choose a GPU model.")
    expect(price_error).to_have_text("Enter the most you will pay per hour, e.g. 46.50.")
    for raw in ("List should have", "Field required", "after validation"):
        expect(form).not_to_contain_text(raw)

    verda = page.get_by_label("Verda")
    verda.check()  # fixed: its message goes, and the others stay
    expect(providers).to_be_empty()
    expect(verda).not_to_have_attribute("aria-invalid", "true")
    expect(model).to_have_text("Choose a GPU model.")
    expect(page.get_by_label("GPU model")).to_have_attribute("aria-invalid", "true")

    price = page.get_by_label("Max price per hour (USD, incl. fees)")
    price.fill("12.345")  # still wrong: the message follows the value
    expect(price_error).to_have_text(
        "Enter an amount in USD with at most two decimals, e.g. 46.50."
    )
    price.fill("12.34")
    expect(price_error).to_be_empty()
    page.get_by_label("GPU model").select_option("B300")
    expect(model).to_be_empty()

    key = page.get_by_label("SSH public key")
    key.fill("not a key")  # a refusal only the API sees: its words, as a sentence
    page.get_by_role("button", name="Place order").click()
    ssh = page.locator("#error-ssh_public_key")
    expect(ssh).to_have_text(
        "Must be one OpenSSH public key line, e.g. 'ssh-ed25519 AAAA... me@host'."
    )
    expect(form.locator(".field-error:not(:empty)")).to_have_count(1)
    key.fill("")
    expect(ssh).to_be_empty()
    page.get_by_role("button", name="Place order").click()
    expect(page.locator("tr[data-order-id]")).to_have_count(1)
    assert [
        o["max_price_per_hour"]
        for o in api.client.get("/v1/orders", headers=api.headers).json()["data"]
    ] == ["12.34"]


def test_offers_show_prices_with_fees_and_which_orders_they_satisfy(
    page: Page, service: str, sim_sync: SimControlSync
) -> None:
    poor = Api(service, credit="1")  # matching orders stay waiting: one hour is $2.63
    poor.place(**h100(name="cheap enough"))
    poor.place(**h100(name="too cheap", max_price_per_hour="2.00"))
    sim_sync.stock(*HYPER_H100, 2)
    sign_in(page, poor.key)
    page.get_by_role("link", name="Offers").click()
    page.get_by_label("Filter by GPU").select_option("H100")
    offer = page.locator('tr[data-offer="hyperstack/CANADA-1/n3-H100x1"]')
    expect(offer).to_contain_text("$2.63", timeout=SLOW)  # $2.40672 + 5 % + $0.10
    expect(offer).to_contain_text("cheap enough")
    expect(offer).not_to_contain_text("too cheap")
    poor.client.close()


def test_the_account_page_shows_money_and_manages_webhook_endpoints(page: Page, api: Api) -> None:
    sign_in(page, api.key)
    page.get_by_role("link", name="Account").click()
    expect(page.locator('[data-field="balance"]')).to_have_text("$100.00")
    expect(page.locator('[data-field="available"]')).to_have_text("$100.00")
    url = page.get_by_label("Webhook URL")
    url.fill("https://169.254.169.254/latest/meta-data")  # the SSRF guard's answer is shown
    page.get_by_role("button", name="Add endpoint").click()
    expect(page.get_by_text("link-local (cloud metadata)")).to_be_visible()
    url.fill("https://203.0.114.9/hooks")
    page.get_by_role("button", name="Add endpoint").click()
    expect(page.get_by_text(re.compile(r"whsec_[A-Za-z0-9+/=]{40,}"))).to_be_visible()
    endpoints = api.client.get("/v1/webhook-endpoints", headers=api.headers).json()["data"]
    assert [e["url"] for e in endpoints] == ["https://203.0.114.9/hooks"]


def test_at_phone_width_the_orders_fit_the_screen(page: Page, api: Api) -> None:
    api.place(**h100(name="on the phone"))
    page.set_viewport_size({"width": 375, "height": 812})
    sign_in(page, api.key)
    expect(page.get_by_text("on the phone")).to_be_visible()
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0


def test_when_the_service_cannot_be_reached_the_page_says_so_and_recovers(
    page: Page, api: Api, running_service: Service
) -> None:
    api.place(**h100(name="still here"))
    sign_in(page, api.key)
    expect(page.locator("#live")).to_have_attribute("data-state", "live")
    running_service.stop()  # the stream drops, and every request is refused
    expect(page.get_by_text("Cannot reach the service")).to_be_visible(timeout=SLOW)
    expect(page.locator("#live")).to_have_attribute("data-state", "polling")
    running_service.start()
    expect(page.get_by_text("Cannot reach the service")).to_be_hidden(timeout=SLOW)
    expect(page.locator("#live")).to_have_attribute("data-state", "live", timeout=SLOW)
    expect(page.get_by_text("still here")).to_be_visible()


SSH_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB5cnVsqeu6woWI8fLxtwtQqatcnRNQyYFRM/QGmv8As me@laptop"
)


def test_a_running_machine_shows_how_to_reach_it_what_it_costs_and_terminates(
    page: Page, service: str, sim_sync: SimControlSync
) -> None:
    # $3.00 pays one hour of $2.63 and nothing more: the runway is below two hours at once.
    short = Api(service, credit="3.00")
    sign_in(page, short.key)
    page.get_by_label("GPU model").select_option("H100")
    page.get_by_label("GPU count").fill("1")
    page.get_by_label("Hyperstack").check()
    page.get_by_label("Max price per hour (USD, incl. fees)").fill("3.00")
    page.get_by_label("Name").fill("reach me")
    page.get_by_label("SSH public key").fill(SSH_KEY)
    page.get_by_role("button", name="Place order").click()
    placed = page.locator("tr[data-order-id]", has_text="reach me")
    expect(placed.locator('[data-field="status"]')).to_have_text("waiting")
    order_id = placed.get_attribute("data-order-id")
    assert order_id and short.order(order_id)["ssh_public_key"] == SSH_KEY

    sim_sync.stock(*HYPER_H100, 1)
    expect(placed.locator('[data-field="status"]')).to_have_text("running", timeout=SLOW)
    expect(page.get_by_test_id("low-balance")).to_contain_text("Low balance", timeout=SLOW)
    placed.get_by_role("link").click()
    expect(page.get_by_test_id("ssh-command")).to_have_text(re.compile(r"^ssh ubuntu@\d+\."))
    expect(page.get_by_test_id("charged")).to_have_text("$2.63")

    page.locator(".head-actions").get_by_role("button", name="Terminate").click()
    page.get_by_role("button", name="Keep it running").click()
    assert short.order(order_id)["status"] == "running"  # asked first: nothing happened
    page.locator(".head-actions").get_by_role("button", name="Terminate").click()
    page.get_by_role("dialog").get_by_role("button", name="Terminate").click()
    expect(page.locator(".head-actions .pill")).to_have_text("terminated", timeout=SLOW)
    expect(page.get_by_text("terminated by you")).to_be_visible()
    # Less than a minute of the hour was used: $2.59 of it comes back ($0.04 per minute).
    expect(page.get_by_test_id("charged")).to_have_text("$0.04")
    expect(page.get_by_text("Cost in all (incl. fees)")).to_be_visible()  # no longer "so far"
    expect(page.get_by_test_id("timeline")).to_contain_text("refunded $2.59")

    page.get_by_role("link", name="Account").click()
    ledger = page.get_by_test_id("ledger")
    expect(ledger).to_contain_text("refund")
    expect(ledger).to_contain_text("$2.59")
    expect(ledger.get_by_role("link", name="reach me").first).to_be_visible()  # by its name
    expect(page.get_by_test_id("low-balance")).to_be_hidden(timeout=SLOW)
    short.client.close()


def test_the_ledger_shows_older_movements_on_asking(page: Page, api: Api) -> None:
    for n in range(54):  # with the account's first credit, 55: a page of 50 and 5 more
        topped = api.client.post(
            f"/v1/accounts/{api.account_id}/credits",
            json={"amount": "1", "note": f"credit {n}"},
            headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        )
        assert topped.status_code == 201, topped.text
    sign_in(page, api.key)
    page.get_by_role("link", name="Account").click()
    rows = page.get_by_test_id("ledger").locator("tbody tr")
    expect(rows).to_have_count(50)
    page.get_by_role("button", name="Show older movements").click()
    expect(rows).to_have_count(55)
    expect(page.get_by_role("button", name="Show older movements")).to_be_hidden()
