"""What a new user does: `make run`, open the printed URL, sign in with the printed demo key,
and watch the demo orders deploy."""

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from app.demo.mode import demo_orders
from tests.dashboard.service import SCREENSHOTS
from tests.processes import clean_env, wait_until_up
from tests.servers import free_port
from tests.waiting import eventually_sync

PRINTED = re.compile(r"Open (http://\S+/) and sign in")
DEMO_KEY = re.compile(r"Demo account API key: (\S+)")
DEPLOY_WITHIN_MS = 90_000  # the demo feed shows a wanted machine every few seconds, at random


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """`autoprovision serve` with no settings at all but ports: demo mode, as `make run` starts it.

    Yields the URL and the demo key it printed.
    """
    log = tmp_path / "serve.log"
    env = clean_env(AUTOPROVISION_PORT=str(free_port()), AUTOPROVISION_SIM_PORT=str(free_port()))
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "serve"],
        cwd=tmp_path,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:

        def printed() -> bool:
            assert process.poll() is None, log.read_text()
            return bool(PRINTED.search(log.read_text()) and DEMO_KEY.search(log.read_text()))

        eventually_sync(printed, 60, 0.1, what=lambda: f"nothing printed: {log.read_text()}")
        output = log.read_text()
        url, key = PRINTED.search(output), DEMO_KEY.search(output)
        assert url and key
        wait_until_up(f"{url.group(1)}healthz", process)  # printed before the socket is bound
        yield url.group(1), key.group(1)
    finally:
        process.terminate()
        process.wait(timeout=40)


@contextmanager
def signed_in(browser: Browser, demo: tuple[str, str], shot: str) -> Iterator[Page]:
    """A page signed in at the printed URL with the printed demo key; its screenshot after."""
    url, key = demo
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        page.goto(url)
        page.get_by_label("API key").fill(key)
        page.get_by_role("button", name="Sign in").click()
        yield page
    finally:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOTS / shot, full_page=True)
        context.close()


def test_the_printed_url_and_demo_key_show_demo_orders_deploying(
    browser: Browser, demo: tuple[str, str]
) -> None:
    with signed_in(browser, demo, "demo_orders_deploying.png") as page:
        expect(page.locator("tr[data-order-id]")).to_have_count(len(demo_orders()))
        running = page.locator('tr[data-order-id] [data-field="status"]', has_text="running")
        expect(running.first).to_be_visible(timeout=DEPLOY_WITHIN_MS)


def test_the_demo_account_tops_up_its_play_money_on_the_account_page(
    browser: Browser, demo: tuple[str, str]
) -> None:
    with signed_in(browser, demo, "demo_top_up.png") as page:
        page.goto(f"{demo[0]}#/account")
        form = page.get_by_test_id("top-up")
        expect(form).to_be_visible()
        balance = page.locator('[data-field="balance"]')
        expect(balance).to_have_text(re.compile(r"^\$[\d,]+\.\d\d$"))
        before = _dollars(balance.text_content())
        form.get_by_label("Add play money (USD)").fill("1000.01")  # above what a top-up may be
        form.get_by_role("button", name="Top up").click()
        expect(page.locator("#tu-error-amount")).to_contain_text("at most $1000.00")
        form.get_by_label("Add play money (USD)").fill("250")
        form.get_by_role("button", name="Top up").click()
        # The ledger shows the top-up; the balance is 250 more, less what machines paid since.
        ledger = page.get_by_test_id("ledger")
        expect(ledger.locator("tr", has_text="demo top-up")).to_have_count(1)
        eventually_sync(lambda: _dollars(balance.text_content()) > before + 150)


def _dollars(text: str | None) -> Decimal:
    return Decimal((text or "0").replace("$", "").replace(",", ""))
