"""Verda's Instant Clusters over a `VerdaClient`: a cluster (`16B200`: two nodes of 8 B200 on
InfiniBand, behind a jump host) is one provider object, made by one create, known by one id and
ended by one discontinue. Each call answers Verda's JSON (`cluster_parse.cluster` and friends
type it) or raises the same typed outcomes as the instance calls.

The adapter offers, creates, follows and ends clusters through them (`cluster_side.py`).
"""

from typing import Any
from urllib.parse import quote

from app.providers.verda import parse
from app.providers.verda.client import DeleteRefused, VerdaClient
from app.providers.verda.parse import PROVIDER


class VerdaClusters:
    """The cluster calls, sent through `api` (its token, lanes and rate-limit budget)."""

    def __init__(self, api: VerdaClient) -> None:
        self.api = api

    def __repr__(self) -> str:
        return f"VerdaClusters({self.api!r})"

    async def cluster_types(self) -> Any:
        """`GET /cluster-types` (public; the whole cluster's price as a decimal string, USD)."""
        return self.api.read(
            await self.api.http.send("GET", "/cluster-types", params={"currency": "usd"})
        )

    async def cluster_availability(self) -> Any:
        """`GET /cluster-availability`: the cluster types in stock, per location."""
        return self.api.read(await self.api.request("GET", "/cluster-availability"))

    async def cluster_images(self, cluster_type: str | None = None) -> Any:
        """`GET /images/cluster` (for one cluster type when given): the images a cluster boots."""
        params = None if cluster_type is None else {"instance_type": cluster_type}
        return self.api.read(await self.api.request("GET", "/images/cluster", params=params))

    async def create_cluster(self, body: dict[str, Any], *, where: str) -> str:
        """`POST /clusters` (the body the SDK sends: hostname, cluster_type, image,
        location_code, shared_volume...); the new cluster's id (Verda answers `{"id": ...}`).

        Raises as `VerdaClient.create_instance` does: `NoCapacity` when that cluster type has
        no stock there, `OutcomeUnknown` on a timeout or a 5xx after sending (the cluster may
        exist), `Rejected` when the refusal names the request itself and `Refused` for any
        other refusal (nothing was made)."""
        response = await self.api.request("POST", "/clusters", is_create=True, json=body)
        return self.api.created(response, where=where, what="a cluster")

    async def cluster(self, cluster_id: str) -> Any | None:
        """`GET /clusters/{id}`; None when Verda does not know the id. A discontinued cluster is
        still answered, with its status."""
        if not parse.is_id(cluster_id):
            return None
        response = await self.api.request("GET", f"/clusters/{quote(cluster_id, safe='')}")
        if response.status_code in (400, 404):
            return None  # "Invalid cluster id"
        return self.api.read(response)

    async def clusters(self) -> Any:
        """`GET /clusters`: every cluster not discontinued."""
        return self.api.read(await self.api.request("GET", "/clusters"))

    async def discontinue_cluster(self, cluster_id: str) -> None:
        """End a cluster, all its nodes with it; one Verda does not know is fine. Verda answers
        202 with no body (its document); a list of results, should one come, is read too.

        Raises `DeleteRefused` when Verda refuses, as `VerdaClient.delete_instance` does (a
        cluster already discontinued is refused too: the caller reads it again to tell).
        """
        if not parse.is_id(cluster_id):
            return
        response = await self.api.request(
            "PUT", "/clusters", json={"actions": [{"id": cluster_id, "action": "discontinue"}]}
        )
        status = response.status_code
        if status in (204, 404):
            return
        self.api.raise_refusal(response, f"discontinue of {cluster_id}")
        if response.is_success and not response.content.strip():
            return
        body = self.api.read(response)
        for item in body if isinstance(body, list) else []:
            if not isinstance(item, dict) or cluster_id not in (
                item.get("id"),
                item.get("clusterId"),
            ):
                continue
            if item.get("status") == "error" and item.get("statusCode") != 404:
                code = item.get("statusCode")
                raise DeleteRefused(
                    PROVIDER,
                    f"discontinue of {cluster_id} refused",
                    status_code=code if isinstance(code, int) else None,
                )
