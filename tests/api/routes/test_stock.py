"""The stock endpoints and the order's estimate, on rows written straight into the database
(the recorder is not needed to read history). Test fees: 5% + $0.10/h, so a provider price of
$40 is $42.10 to a user, $44 is $46.30 and $50 is $52.60."""

from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Interconnect, Provider
from app.core.clock import utcnow
from app.core.market import StockForecast
from app.storage.models import StockCoverage, StockInterval
from tests.factories import (
    coverage_window,
    create_account,
    place_order,
    record_forecasts,
    record_history,
    stock_interval,
)

H = 3600


def interval(
    start: datetime, end: datetime | None, price: str = "40", *, last_seen: datetime | None = None,
    provider: str = "verda", region: str = "FIN-01", sku: str = "8B300",
) -> StockInterval:  # fmt: skip
    """An 8x B300 SXM interval at `price` (the provider's), gone at `end` (None: in stock)."""
    return stock_interval((provider, region, sku), start, end, price, last_seen=last_seen)


def covered(provider: str, start: datetime, last_read: datetime) -> StockCoverage:
    """A coverage window still open, read from `start` to `last_read`."""
    return coverage_window(provider, start, last_read)


async def insert(engine: AsyncEngine, *rows: Any) -> None:
    """Write rows as the recorder would, committed."""
    await record_history(engine, *rows)


async def ten_hours(engine: AsyncEngine) -> datetime:
    """Verda read for the last 10 hours; in stock at $40 from 6 h ago to 4 h ago (a price
    change to $50 at 4 h ago until 3 h ago), and hyperstack at $44 1 h ago, not read."""
    now = utcnow()
    await insert(
        engine,
        covered("verda", now - timedelta(hours=10), now),
        interval(now - timedelta(hours=6), now - timedelta(hours=4), "40"),
        interval(now - timedelta(hours=4), now - timedelta(hours=3), "50"),
        interval(now - timedelta(hours=1), None, "44", provider="hyperstack", sku="h"),
    )
    return now


async def test_history_pages_newest_first_with_coverage(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    account = await create_account(client)
    await ten_hours(engine)
    first = await client.get("/v1/stock/history?limit=2", headers=account.headers)
    assert first.status_code == 200, first.text
    body = first.json()
    assert [r["price_per_hour"] for r in body["data"]] == ["44.00", "50.00"]
    assert body["data"][0]["gone_at"] is None
    assert body["data"][1]["price_per_hour_with_fees"] == "52.60"
    assert [c["provider"] for c in body["coverage"]] == ["verda"]
    second = await client.get(
        f"/v1/stock/history?limit=2&cursor={body['next_cursor']}", headers=account.headers
    )
    assert [r["price_per_hour"] for r in second.json()["data"]] == ["40.00"]
    assert second.json()["next_cursor"] is None
    only = await client.get("/v1/stock/history?provider=hyperstack", headers=account.headers)
    assert [r["provider"] for r in only.json()["data"]] == ["hyperstack"]
    assert only.json()["coverage"] == []


@pytest.mark.parametrize(
    "query",
    [
        "gpu_model=Z999",
        "since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z",
        "cursor=sti_00000000000000000000000000",
        "provider=nowhere",
        "since=yesterday",
        # Moments that UTC cannot hold, or long before any stock (schemathesis found the first).
        "until=0001-01-23T00:40:01-19:13",
        "since=0001-01-01T00:00:00%2B05:00",
        "until=9999-12-31T23:00:00-05:00",
        "since=1969-12-31T23:59:59Z",
    ],
)
async def test_history_refuses_bad_input(client: httpx.AsyncClient, query: str) -> None:
    account = await create_account(client)
    response = await client.get(f"/v1/stock/history?{query}", headers=account.headers)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "validation_error"


async def test_history_from_the_first_moment_kept(client: httpx.AsyncClient) -> None:
    """A span ending near 1970 starts at 1970, not the retention before it."""
    account = await create_account(client)
    response = await client.get(
        "/v1/stock/history?until=1970-01-02T00:00:00%2B01:00", headers=account.headers
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["since"], body["until"]) == ("1970-01-01T00:00:00Z", "1970-01-01T23:00:00Z")
    assert body["data"] == []


async def test_history_needs_an_account_key(client: httpx.AsyncClient) -> None:
    assert (await client.get("/v1/stock/history")).status_code == 401


async def test_summary_per_key(client: httpx.AsyncClient, engine: AsyncEngine) -> None:
    account = await create_account(client)
    await ten_hours(engine)
    response = await client.get(
        "/v1/stock/summary?gpu_model=b300&providers=verda,hyperstack&window=1d",
        headers=account.headers,
    )
    assert response.status_code == 200, response.text
    hyperstack, verda = response.json()["data"]
    # One appearance of 3 hours (the price change does not split it), never seen again.
    assert verda["appearances"] == 1
    assert verda["hours_in_stock"] == 3.0
    assert verda["median_seconds_in_stock"] == 3 * H
    assert verda["median_gap_seconds"] is None
    assert (verda["price_min"], verda["price_median"], verda["price_max"]) == (
        "42.10",
        "42.10",
        "52.60",
    )
    assert verda["hours_observed"] == 10.0
    assert hyperstack["price_min"] == "46.30" and hyperstack["hours_observed"] == 0.0


async def test_the_summary_carries_the_providers_forecasts_of_the_model_in_their_words(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    account = await create_account(client)
    said_at = utcnow() - timedelta(days=40)  # said long ago, and still what it says
    hyperstack = Provider("hyperstack")
    pcie, sxm = Interconnect.PCIE, Interconnect.SXM
    h100 = StockForecast(hyperstack, "CANADA-1", "H100-80G-PCIe", "H100", pcie, "10+", "25+")
    b300 = StockForecast(hyperstack, "US-1", "B300-SXM", "B300", sxm, None, "5")
    await record_forecasts(engine, hyperstack, h100, b300, read_at=said_at)

    async def forecasts(query: str) -> list[dict[str, Any]]:
        response = await client.get(f"/v1/stock/summary?{query}", headers=account.headers)
        assert response.status_code == 200, response.text
        return list(response.json()["forecasts"])

    # No history in the window, and a count Hyperstack does not count in: still what it says.
    (shown,) = await forecasts("gpu_model=h100&gpu_count=8&window=1d")
    assert shown == {
        "provider": "hyperstack",
        "region": "CANADA-1",
        "provider_model": "H100-80G-PCIe",
        "gpu_model": "H100",
        "interconnect": "pcie",
        "within_7_days": "10+",
        "within_30_days": "25+",
        "changed_at": shown["changed_at"],
    }
    assert datetime.fromisoformat(shown["changed_at"]) == said_at
    assert await forecasts("gpu_model=H100&providers=verda") == []
    assert [f["gpu_model"] for f in await forecasts("providers=hyperstack")] == ["H100", "B300"]

    schema = (await client.get("/openapi.json")).json()["components"]["schemas"]["SummaryOut"]
    assert "their word, not ours" in schema["properties"]["forecasts"]["description"]


@pytest.mark.parametrize(
    "query", ["window=91d", "window=7x", "window=0h", "providers=nowhere", "gpu_model=Z999"]
)
async def test_summary_refuses_bad_input(client: httpx.AsyncClient, query: str) -> None:
    account = await create_account(client)
    response = await client.get(f"/v1/stock/summary?{query}", headers=account.headers)
    assert response.status_code == 422, response.text


ESTIMATE = {
    "gpu_model": "B300",
    "gpu_count": 8,
    "providers": ["verda"],
    "max_price_per_hour": "45",
    "window": "10h",
}


async def test_estimate_with_censoring_and_the_price_curve(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    account = await create_account(client)
    await ten_hours(engine)
    response = await client.post("/v1/stock/estimate", json=ESTIMATE, headers=account.headers)
    assert response.status_code == 200, response.text
    body = response.json()
    # At $45 only the $42.10 part (6 h ago to 4 h ago) matches: 20% of the 10 observed hours.
    # Waits: 0 for 20% of moments; seen, spread evenly over (0, 4h], for 40%; censored,
    # spread evenly over (0, 4h], for 40% (after it, none came). On a fine grid Kaplan-Meier
    # gives S(w) = 0.8 * sqrt(1 - w/4h) (hazard 0.1/h over 0.8 * (1 - w/4h) at risk), so the
    # median is where sqrt(...) = 0.625: w = 2.44 h (8775 s), and the p90 where it is 0.125:
    # w = 3.94 h (14175 s). Counting the censored waits as seen would have said 1.5 h.
    assert body["status"] == "ok" and body["appearances"] == 1
    assert body["observed_hours"] == pytest.approx(10, abs=0.01)
    assert body["in_stock_fraction"] == pytest.approx(0.2, abs=0.001)
    assert body["median_seconds"] == pytest.approx(8775, abs=60)
    assert body["p90_seconds"] == pytest.approx(14175, abs=60)
    # Observed prices fitting the order: $42.10 below the max, $52.60 above (hyperstack's
    # $46.30 is not among the order's providers).
    curve = body["price_curve"]
    assert [p["max_price_per_hour"] for p in curve] == ["42.10", "52.60"]
    assert curve[1]["in_stock_fraction"] == pytest.approx(0.3, abs=0.001)


async def test_estimate_without_observation_is_insufficient(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    account = await create_account(client)
    await ten_hours(engine)
    body = {**ESTIMATE, "providers": ["hyperstack"], "max_price_per_hour": "50"}
    response = await client.post("/v1/stock/estimate", json=body, headers=account.headers)
    out = response.json()
    assert out["status"] == "insufficient_data"
    assert out["missing"] == "observed only 0 minutes of the last 10 hours"
    assert out["median_seconds"] is None and out["median_more_than_seconds"] is None
    cheap = {**ESTIMATE, "max_price_per_hour": "30"}
    none = (await client.post("/v1/stock/estimate", json=cheap, headers=account.headers)).json()
    assert none["status"] == "insufficient_data" and none["appearances"] == 0
    assert none["missing"].startswith("no appearance at or under $30.00 in 10")


@pytest.mark.parametrize(
    "change",
    [
        {"max_price_per_hour": "1000000"},
        {"max_price_per_hour": "-1"},
        {"gpu_model": "Z999"},
        {"window": "1000d"},
        {"providers": ["nowhere"]},
    ],
)
async def test_estimate_refuses_bad_input(
    client: httpx.AsyncClient, change: dict[str, Any]
) -> None:
    account = await create_account(client)
    response = await client.post(
        "/v1/stock/estimate", json={**ESTIMATE, **change}, headers=account.headers
    )
    assert response.status_code == 422, response.text
    assert "error" in response.json()


async def test_a_waiting_order_carries_its_estimate_on_read_only(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    account = await create_account(client)
    await ten_hours(engine)
    order = await place_order(client, account, providers=["verda"])
    one = (await client.get(f"/v1/orders/{order['id']}", headers=account.headers)).json()
    assert one["estimate"]["window"] == "7d"
    assert one["estimate"]["appearances"] == 1  # the $42.10 part, under the order's $45
    assert one["estimate"]["observed_hours"] == pytest.approx(10, abs=0.01)
    listed = (await client.get("/v1/orders", headers=account.headers)).json()["data"]
    assert "estimate" not in listed[0]
    await client.post(f"/v1/orders/{order['id']}/cancel", headers=account.headers)
    gone = (await client.get(f"/v1/orders/{order['id']}", headers=account.headers)).json()
    assert gone["status"] == "cancelled" and gone["estimate"] is None


async def with_a_cluster(engine: AsyncEngine) -> datetime:
    """Verda read for the last 10 hours: one 8x B300 machine at $40 from 6 h ago to 4 h ago;
    a cluster of two such machines (on InfiniBand), at the same $40, from 3 h ago to 2 h ago
    and again from 1 h ago, still in stock."""
    now = utcnow()

    def cluster(start: datetime, end: datetime | None) -> StockInterval:
        return stock_interval(
            ("verda", "FIN-01", "16B300"), start, end, "40", last_seen=end or now,
            nodes=2, cluster_interconnect="infiniband",
        )  # fmt: skip

    await insert(
        engine,
        covered("verda", now - timedelta(hours=10), now),
        interval(now - timedelta(hours=6), now - timedelta(hours=4), "40"),
        cluster(now - timedelta(hours=3), now - timedelta(hours=2)),
        cluster(now - timedelta(hours=1), None),
    )
    return now


async def test_a_clusters_stock_never_counts_for_one_of_its_machines(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    account = await create_account(client)
    await with_a_cluster(engine)
    post, get = client.post, client.get
    single = (await post("/v1/stock/estimate", json=ESTIMATE, headers=account.headers)).json()
    assert (single["nodes"], single["appearances"]) == (1, 1)  # the machine's, not the cluster's
    assert single["in_stock_fraction"] == pytest.approx(0.2, abs=0.001)
    both = {**ESTIMATE, "nodes": 2}
    cluster = (await post("/v1/stock/estimate", json=both, headers=account.headers)).json()
    assert (cluster["nodes"], cluster["appearances"]) == (2, 2)  # control: the cluster's count
    assert cluster["in_stock_fraction"] == pytest.approx(0.2, abs=0.001)

    query = "/v1/stock/summary?gpu_model=b300&gpu_count=8&window=1d"
    summary = (await get(query, headers=account.headers)).json()
    assert summary["nodes"] == 1
    assert [(k["sku"], k["nodes"], k["appearances"]) for k in summary["data"]] == [("8B300", 1, 1)]
    summary = (await get(f"{query}&nodes=2", headers=account.headers)).json()
    assert summary["nodes"] == 2
    assert [(k["sku"], k["nodes"], k["appearances"]) for k in summary["data"]] == [("16B300", 2, 2)]

    history = (await get("/v1/stock/history?gpu_model=b300", headers=account.headers)).json()
    assert history["nodes"] == 1
    assert [(r["sku"], r["nodes"], r["cluster_interconnect"]) for r in history["data"]] == [
        ("8B300", 1, None)
    ]
    query = "/v1/stock/history?gpu_model=b300&nodes=2"
    history = (await get(query, headers=account.headers)).json()
    assert [(r["sku"], r["nodes"], r["cluster_interconnect"]) for r in history["data"]] == [
        ("16B300", 2, "infiniband"),
        ("16B300", 2, "infiniband"),
    ]


@pytest.mark.parametrize("nodes", [0, 17, "2"])
async def test_nodes_outside_one_to_sixteen_are_refused_by_name(
    client: httpx.AsyncClient, nodes: object
) -> None:
    account = await create_account(client)
    response = await client.post(
        "/v1/stock/estimate", json={**ESTIMATE, "nodes": nodes}, headers=account.headers
    )
    assert response.status_code == 422, response.text
    assert [d["field"] for d in response.json()["error"]["details"]] == ["nodes"]
    for path in ("summary", "history"):
        if isinstance(nodes, int):
            answer = await client.get(f"/v1/stock/{path}?nodes={nodes}", headers=account.headers)
            assert answer.status_code == 422, answer.text
            assert [d["field"] for d in answer.json()["error"]["details"]] == ["nodes"]
    # Control: at the edges, each is taken.
    for edge in (1, 16):
        body = {**ESTIMATE, "nodes": edge}
        assert (await client.post("/v1/stock/estimate", json=body, headers=account.headers)).json()[
            "nodes"
        ] == edge
        for path in ("summary", "history"):
            answer = await client.get(f"/v1/stock/{path}?nodes={edge}", headers=account.headers)
            assert answer.status_code == 200 and answer.json()["nodes"] == edge
