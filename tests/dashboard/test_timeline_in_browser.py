"""An order's timeline in the browser: a machine that runs for hours shows one line for its run
of billed hours, not one per hour (the ledger keeps each)."""

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from app.simulators.control import SimControlSync
from tests.dashboard.pages import SLOW, row, sign_in
from tests.dashboard.service import Api, Service
from tests.fixtures.settings import live_settings

HYPER_H100 = ("hyperstack", "n3-H100x1", "CANADA-1")
HOUR_SECONDS = 1.0  # billed hours of a second: several are paid within the test


@pytest.fixture
def running_service(
    sim_sync: SimControlSync, sim_url: str, sqlite_template: Path, tmp_path: Path
) -> Iterator[Service]:
    """The service with its watcher, billing hours of a second."""
    database = tmp_path / "dashboard.db"
    shutil.copyfile(sqlite_template, database)
    settings = live_settings(f"sqlite+aiosqlite:///{database}", sim_url).model_copy(
        update={"billing_hour_seconds": HOUR_SECONDS}
    )
    service = Service(settings)
    service.start()
    yield service
    service.stop()


def test_billed_hours_show_as_one_line_that_counts_them(
    page: Page, api: Api, sim_sync: SimControlSync
) -> None:
    order = api.place(
        gpu_model="H100", gpu_count=1, providers=["hyperstack"], max_price_per_hour="3.00"
    )
    sim_sync.stock(*HYPER_H100, 1)
    sign_in(page, api.key)
    expect(row(page, order["id"]).locator('[data-field="status"]')).to_have_text(
        "running", timeout=SLOW
    )
    row(page, order["id"]).get_by_role("link").click()
    timeline = page.get_by_test_id("timeline")
    expect(timeline).to_contain_text("hours paid in a row", timeout=SLOW)
    billed = timeline.locator("li", has_text="Billing hour")
    expect(billed).to_have_count(1)  # one line, however many hours
    # Its time is said as its sentence says times: UTC, on a 24-hour clock.
    stamp = billed.locator("time").text_content() or ""
    assert re.fullmatch(r"\w{3} \d{1,2}, \d{4}, \d\d:\d\d:\d\d UTC", stamp), stamp
    ledger = api.client.get("/v1/account/ledger?limit=100", headers=api.headers).json()["data"]
    hours = [e for e in ledger if e["kind"] == "debit"]
    assert len(hours) >= 2  # the control: the ledger has each hour paid
