"""What the browser tests do on the dashboard's pages: sign in, find an order's row."""

from typing import Any

from playwright.sync_api import Page, expect

SLOW = 15_000  # ms: deploy, boot and the page's next poll


def sign_in(page: Page, key: str) -> None:
    """Open the dashboard and sign in with `key`."""
    page.goto("/")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def row(page: Page, order_id: str) -> Any:
    """The orders list's row of `order_id`."""
    return page.locator(f'tr[data-order-id="{order_id}"]')
