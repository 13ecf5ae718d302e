"""Stock history in the browser: the Stock page's timeline and summary, and the order form's
expected wait with its price curve, on history rows written straight into the service's
database (the watcher is not needed to read history). Test fees: 5 % + $0.10/h, so a provider
price of $2.40 is $2.62 to a user, $3.00 is $3.25 and $2.00 is $2.20."""

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from app.core.catalogue import Interconnect, Provider
from app.core.clock import utcnow
from app.core.market import StockForecast
from app.storage.db import create_engine
from app.storage.models import StockCoverage, StockInterval
from tests.dashboard.service import Api
from tests.factories import coverage_window, record_forecasts, record_history, stock_interval

H = timedelta(hours=1)
D = timedelta(days=1)
HYPER = ("hyperstack", "CANADA-1", "n3-H100x1")
VERDA = ("verda", "FIN-01", "1H100.80S")
HYPERSTACK = Provider("hyperstack")
# What Hyperstack says it plans: of the H100 PCIe in CANADA-1, and of a B300 (not shown for H100).
FORECASTS = (
    StockForecast(HYPERSTACK, "CANADA-1", "H100-80G-PCIe", "H100", Interconnect.PCIE, "10+", "25+"),
    StockForecast(HYPERSTACK, "US-1", "B300-SXM", "B300", Interconnect.SXM, "5", None),
)  # fmt: skip


def interval(key: tuple[str, str, str], start: datetime, hours: float, price: str) -> StockInterval:
    """A 1x H100 appearance at `price` (the provider's), gone after `hours`."""
    end = start + timedelta(hours=hours)
    machine = ("H100", 1, None, None)
    return stock_interval(
        key, start, end, price, machine=machine, last_seen=end - timedelta(seconds=1)
    )


def read(provider: str, start: datetime, end: datetime) -> StockCoverage:
    """A coverage window: the provider's stock was read from `start` to `end`."""
    return coverage_window(provider, start, end, ended=True)


@pytest.fixture
def history(service: str, tmp_path: Path) -> datetime:
    """A week of 1x H100 history in the service's own database (conftest's `service` fixture
    serves tmp_path/dashboard.db). Hyperstack was not read from 10 h to 8 h ago.

    In the last 24 h: Hyperstack 4 appearances ($2.62 at 20 h and 6 h ago, $3.25 at 15 h and
    2 h ago), Verda 1 ($2.20 at 12 h ago); over 7 days 3 and 1 more. Hyperstack's last read,
    3 h ago, said FORECASTS."""
    now = utcnow()
    rows: list[StockInterval | StockCoverage] = [
        read("hyperstack", now - 7 * D, now - 10 * H),
        read("hyperstack", now - 8 * H, now),
        read("verda", now - 7 * D, now),
        interval(HYPER, now - 20 * H, 1, "2.40"),
        interval(HYPER, now - 6 * H, 1, "2.40"),
        interval(HYPER, now - 15 * H, 0.5, "3.00"),
        interval(HYPER, now - 2 * H, 0.5, "3.00"),
        interval(HYPER, now - 3 * D, 2, "2.40"),
        interval(HYPER, now - 5 * D, 1, "2.40"),
        interval(HYPER, now - 4 * D, 3, "3.00"),
        interval(VERDA, now - 12 * H, 1, "2.00"),
        interval(VERDA, now - 6 * D, 1, "2.00"),
    ]
    url = f"sqlite+aiosqlite:///{tmp_path / 'dashboard.db'}"
    with ThreadPoolExecutor(1) as thread:  # Playwright's own loop runs in this one
        thread.submit(asyncio.run, record(url, rows, said_at=now - 3 * H)).result()
    return now


async def record(
    url: str, rows: list[StockInterval | StockCoverage], said_at: datetime, generated: bool = False
) -> None:
    engine = create_engine(url)
    try:
        await record_history(engine, *rows, generated=generated)
        await record_forecasts(engine, HYPERSTACK, *FORECASTS, read_at=said_at)
    finally:
        await engine.dispose()


def sign_in(page: Page, key: str) -> None:
    page.goto("/")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def test_the_stock_page_shows_lanes_with_bars_gaps_and_the_summary(
    page: Page, api: Api, history: datetime
) -> None:
    sign_in(page, api.key)
    page.get_by_role("link", name="Stock").click()
    expect(page.get_by_role("heading", name="Stock", exact=True)).to_be_visible()
    page.get_by_label("GPU model").select_option("H100")
    page.get_by_label("GPU count").fill("1")

    hyper = page.locator('[data-lane="hyperstack/CANADA-1"]')
    verda = page.locator('[data-lane="verda/FIN-01"]')
    expect(hyper.locator(".bar")).to_have_count(4)
    expect(verda.locator(".bar")).to_have_count(1)
    expect(page.locator(".lane[data-lane]")).to_have_count(2)
    expect(hyper).to_contain_text("CANADA-1")
    # The two unread hours are shaded on Hyperstack's lane only.
    expect(hyper.locator(".gap")).to_have_count(1)
    assert "(2 h)" in (hyper.locator(".gap").get_attribute("title") or "")
    expect(verda.locator(".gap")).to_have_count(0)
    titles = [bar.get_attribute("title") or "" for bar in hyper.locator(".bar").all()]
    assert sum("$2.62/h incl. fees · 1 available · 1 h ·" in t for t in titles) == 2
    assert sum("$3.25/h incl. fees · 1 available · 30 min ·" in t for t in titles) == 2

    summary = page.locator("tr[data-key]")
    expect(summary).to_have_count(2)
    hyper_row = page.locator('tr[data-key="hyperstack/CANADA-1/n3-H100x1"]')
    expect(hyper_row.locator('[data-label="Appearances"]')).to_have_text("4")
    prices = hyper_row.locator('[data-label="Price incl. fees"]')
    expect(prices).to_contain_text("$2.62 \N{EN DASH} $3.25")
    expect(page.locator('tr[data-key="verda/FIN-01/1H100.80S"]')).to_contain_text("$2.20/h")

    # What Hyperstack says is coming, of the H100 only, and said to be its word.
    forecasts = page.get_by_test_id("stock-forecasts").locator("li")
    expect(forecasts).to_have_count(1)
    expect(forecasts).to_contain_text("Hyperstack plans 10+ more within 7 days, 25+ within 30")
    expect(forecasts).to_contain_text("H100-80G-PCIe in CANADA-1 · said so for 3 h")
    expect(page.get_by_text("the provider's word, not ours")).to_be_visible()
    expect(page.get_by_text("Includes generated demo history")).to_have_count(0)  # all seen

    page.get_by_label("Period").select_option("7d")
    expect(hyper.locator(".bar")).to_have_count(7)
    expect(verda.locator(".bar")).to_have_count(2)
    expect(hyper_row.locator('[data-label="Appearances"]')).to_have_text("7")
    expect(page.get_by_role("heading", name="Summary, last 7 days")).to_be_visible()


def test_generated_demo_history_is_said_to_be_generated(
    page: Page, api: Api, service: str, tmp_path: Path
) -> None:
    now = utcnow()
    rows: list[StockInterval | StockCoverage] = [
        read("hyperstack", now - 2 * D, now),
        interval(HYPER, now - 6 * H, 1, "2.40"),
    ]
    url = f"sqlite+aiosqlite:///{tmp_path / 'dashboard.db'}"
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, record(url, rows, said_at=now, generated=True)).result()
    sign_in(page, api.key)
    page.get_by_role("link", name="Stock").click()
    page.get_by_label("GPU model").select_option("H100")
    page.get_by_label("GPU count").fill("1")
    expect(page.locator('[data-lane="hyperstack/CANADA-1"] .bar')).to_have_count(1)
    expect(page.get_by_text("Includes generated demo history")).to_be_visible()


def test_the_order_form_shows_the_expected_wait_and_a_point_on_the_curve_fills_the_price(
    page: Page, api: Api, history: datetime
) -> None:
    sign_in(page, api.key)
    page.get_by_label("GPU model").select_option("H100")
    page.get_by_label("GPU count").fill("1")
    page.get_by_label("Hyperstack").check()
    price = page.get_by_label("Max price per hour (USD, incl. fees)")
    price.fill("2.62")

    line = page.get_by_test_id("estimate")
    expect(line).to_contain_text("Last 7 days at or under $2.62/h: 4 appearances, typical wait")
    curve = page.get_by_test_id("price-curve")
    expect(curve.locator("canvas")).to_be_visible()

    # Click the $3.25 point where uPlot drew it.
    x, y = curve.evaluate(
        """el => {
            const u = el._uplot, i = u.data[0].indexOf(3.25);
            return [u.valToPos(u.data[0][i], "x"), u.valToPos(u.data[1][i] ?? u.data[2][i], "y")];
        }"""
    )
    curve.locator(".u-over").click(position={"x": x, "y": y})
    expect(price).to_have_value("3.25")
    expect(line).to_contain_text("Last 7 days at or under $3.25/h: 7 appearances, typical wait")

    # Below every price seen: the API's own words for what is missing; the curve still shows
    # the prices seen above, and its buttons (for keyboard users) pick one as a click does.
    price.fill("2.00")
    expect(line).to_contain_text("no appearance at or under $2.00")
    expect(page.locator(".curve-points button")).to_have_count(2)
    page.get_by_role("button", name="$2.62/h").click()
    expect(price).to_have_value("2.62")
    expect(line).to_contain_text("at or under $2.62/h")
