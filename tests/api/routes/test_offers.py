"""`GET /v1/offers`: the latest stock each provider showed, as the watcher kept it."""

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import ClusterInterconnect, Provider
from app.providers.fake import FakeAdapter
from app.services import offers
from app.storage.db import create_sessionmaker, session_scope
from tests.factories import create_account, place_order

# The fake, under a provider name orders may use here, so that an order can match its offers.
FAKE = FakeAdapter(Provider("verda"))
SINGLE = FAKE.offer(gpu_model="B300", price="40.00")
CLUSTER = FAKE.offer(
    gpu_model="B300",
    nodes=2,
    price="40.00",  # as cheap as one machine: only its nodes keep it from the order
    cluster_interconnect=ClusterInterconnect.INFINIBAND,
)


async def keep_cluster_and_single(engine: AsyncEngine) -> None:
    """The watcher's latest read of "verda": the cluster and the single machine."""
    async with session_scope(create_sessionmaker(engine)) as session:
        await offers.keep_snapshot(
            session,
            provider="verda",
            offers=[offers.offer_json(o) for o in (CLUSTER, SINGLE)],
            fetched_at=None,
            error=None,
        )


async def test_offers_show_a_clusters_nodes_and_fabric_and_match_only_cluster_orders(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    account = await create_account(client)
    order = await place_order(client, account, providers=["verda"], max_price_per_hour="45")
    await keep_cluster_and_single(engine)
    response = await client.get("/v1/offers?gpu_model=b300&gpu_count=8", headers=account.headers)
    assert response.status_code == 200, response.text
    shown = {o["sku"]: o for o in response.json()["data"]}
    cluster, single = shown["fake-b300x8-n2"], shown["fake-b300x8"]
    assert (cluster["gpu_count"], cluster["nodes"]) == (8, 2)
    assert cluster["cluster_interconnect"] == "infiniband"
    assert (single["nodes"], single["cluster_interconnect"]) == (1, None)
    assert cluster["matching_orders"] == []  # an 8x B300 order is not a cluster's
    assert single["matching_orders"] == [order["id"]]  # control: the single machine matches


async def test_offers_can_be_filtered_by_nodes(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    account = await create_account(client)
    await keep_cluster_and_single(engine)

    async def skus(query: str) -> set[str]:
        response = await client.get(f"/v1/offers{query}", headers=account.headers)
        assert response.status_code == 200, response.text
        return {o["sku"] for o in response.json()["data"]}

    assert await skus("") == {"fake-b300x8-n2", "fake-b300x8"}  # control: no filter, both
    assert await skus("?nodes=2") == {"fake-b300x8-n2"}
    assert await skus("?nodes=1") == {"fake-b300x8"}
    refused = await client.get("/v1/offers?nodes=17", headers=account.headers)
    assert refused.status_code == 422
    assert refused.json()["error"]["details"][0]["field"] == "nodes"
