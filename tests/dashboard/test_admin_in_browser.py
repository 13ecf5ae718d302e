"""The operator's view in the browser: signed in with the admin key, every account with its
money and machines, a credit to one of them, every order, and the providers."""

from playwright.sync_api import Page, expect

from app.simulators.control import SimControlSync
from tests.dashboard.pages import SLOW
from tests.dashboard.service import Api
from tests.fixtures.settings import ADMIN_KEY

HYPER_H100 = ("hyperstack", "n3-H100x1", "CANADA-1")


def test_the_admin_sees_every_account_credits_one_and_sees_the_providers(
    page: Page, service: str, sim_sync: SimControlSync
) -> None:
    busy, idle = Api(service), Api(service, credit="7")
    busy.place(gpu_model="H100", gpu_count=1, providers=["hyperstack"], max_price_per_hour="3.00")
    sim_sync.stock(*HYPER_H100, 1)
    page.goto("/")
    page.get_by_label("API key").fill(ADMIN_KEY)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Admin")).to_be_visible()
    expect(page.get_by_role("link", name="Orders")).to_be_hidden()  # an account's pages

    rows = page.get_by_test_id("accounts").locator("tbody tr")
    busy_row = rows.filter(has_text=busy.account_id)
    expect(busy_row.locator('[data-label="Machines"]')).to_have_text("1", timeout=SLOW)
    expect(busy_row.locator('[data-label="Spend"]')).to_have_text("$2.63/h")
    idle_row = rows.filter(has_text=idle.account_id)
    expect(idle_row.locator('[data-label="Balance"]')).to_have_text("$7.00")

    idle_row.get_by_label("Credit to Grace").fill("25")
    idle_row.get_by_role("button", name="Credit").click()
    expect(idle_row.locator('[data-label="Balance"]')).to_have_text("$32.00")
    balance = idle.client.get("/v1/account", headers=idle.headers).json()["balance"]
    assert balance == "32.00"

    sideways = page.evaluate(
        "Math.max(...[...document.querySelectorAll('.table-wrap')]"
        ".map(w => w.scrollWidth - w.clientWidth))"
    )
    assert sideways <= 0, f"{sideways} px to scroll sideways"  # every column on the screen
    orders = page.get_by_test_id("orders").locator("tbody tr")
    expect(orders).to_have_count(1)  # every account's orders, with whose they are
    expect(orders.first).to_contain_text(busy.account_id)
    expect(orders.first.locator('[data-label="Status"]')).to_have_text("running", timeout=SLOW)
    providers = page.get_by_test_id("providers").locator("tbody tr")
    expect(providers).to_have_count(3)
    expect(providers.filter(has_text="Hyperstack")).to_contain_text("yes")
    busy.client.close()
    idle.client.close()
