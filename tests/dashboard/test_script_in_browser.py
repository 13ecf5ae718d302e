"""The dashboard's start-up script: typed in the order form, sent as typed, and shown on the
order's page as its size and SHA-256 only."""

import hashlib

from playwright.sync_api import Page, expect

from tests.dashboard.pages import row, sign_in
from tests.dashboard.service import Api

SCRIPT = "#!/bin/bash\nexport HF_TOKEN=hf_s3cr3t\necho 'prêt' > /tmp/ready\n"


def test_a_script_typed_in_the_form_is_placed_and_shown_as_its_size_and_hash(
    page: Page, api: Api
) -> None:
    sign_in(page, api.key)
    page.get_by_label("GPU model").select_option("H100")
    page.get_by_label("GPU count").fill("1")
    page.get_by_label("Hyperstack").check()
    page.get_by_label("Max price per hour (USD, incl. fees)").fill("3.00")
    page.get_by_label("Name").fill("with a script")
    page.get_by_label("Start-up script").fill(SCRIPT)
    page.get_by_role("button", name="Place order").click()

    placed = page.locator("tr[data-order-id]", has_text="with a script")
    expect(placed).to_have_count(1)
    order_id = placed.get_attribute("data-order-id")
    assert order_id is not None
    digest = hashlib.sha256(SCRIPT.encode()).hexdigest()
    order = api.order(order_id)
    assert (order["startup_script_sha256"], order["startup_script_bytes"]) == (
        digest,
        len(SCRIPT.encode()),
    )
    row(page, order_id).get_by_role("link").click()
    shown = page.get_by_test_id("startup-script")
    expect(shown).to_have_text(f"{len(SCRIPT.encode())} bytes, SHA-256 {digest}")
    expect(page.locator("body")).not_to_contain_text("hf_s3cr3t")
