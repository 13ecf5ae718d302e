"""Orders with alternatives: several shapes, one machine (or cluster) deployed, the cheapest that
shows or, with `prefer: listed`, the first listed that shows. Black box, both databases."""

from decimal import Decimal
from typing import Any

import httpx
import pytest

from app.settings import Settings
from app.simulators.control import SimControl
from tests.factories import AccountHandle, create_account
from tests.waiting import eventually
from tests.watcher.orders import order, place, reaches

VERDA_8B300 = ("verda", "8B300.240V", "FIN-03")  # $45.52/h
VERDA_16H200 = ("verda", "16H200", "FIN-01")  # 2 nodes of 8 H200: $54.24/h
HYPER_H100_X1 = ("hyperstack", "n3-H100x1", "CANADA-1")  # $2.40672/h with its public IP
HYPER_H100_X2 = ("hyperstack", "n3-H100x2", "CANADA-1")  # $4.80672/h
HYPER_H100_X8 = ("hyperstack", "n3-H100x8", "CANADA-1")  # $19.20672/h -> $20.27 with fees


def alternative(gpu_model: str, gpu_count: int, price: str, **more: Any) -> dict[str, Any]:
    return {
        "gpu_model": gpu_model,
        "gpu_count": gpu_count,
        "providers": more.pop("providers", ["verda"]),
        "max_price_per_hour": price,
        **more,
    }


KIMI = [alternative("B300", 8, "55.00"), alternative("H200", 8, "70.00", nodes=2)]
H100S = [
    alternative("H100", 2, "6.00", providers=["hyperstack"]),
    alternative("H100", 1, "3.00", providers=["hyperstack"]),
]


async def creates(sim: SimControl, provider: str) -> list[dict[str, Any]]:
    return list(await sim.creates(provider))


async def placed(
    client: httpx.AsyncClient, handle: AccountHandle, **body: Any
) -> tuple[str, dict[str, Any]]:
    order_id = await place(client, handle, body)
    return order_id, await order(client, handle, order_id)


class TestPlacing:
    async def test_an_order_shows_its_alternatives_and_a_single_shape_order_its_one(
        self, client: httpx.AsyncClient
    ) -> None:
        handle = await create_account(client, credit="200")
        _, listed = await placed(client, handle, alternatives=KIMI, prefer="Listed")
        assert [
            (a["gpu_model"], a["nodes"], a["max_price_per_hour"]) for a in listed["alternatives"]
        ] == [("B300", 1, "55.00"), ("H200", 2, "70.00")]
        assert listed["prefer"] == "listed"
        # The top level is the first alternative, so a client that knows one shape reads it.
        assert (listed["gpu_model"], listed["nodes"], listed["max_price_per_hour"]) == (
            "B300",
            1,
            "55.00",
        )
        _, single = await placed(client, handle, **KIMI[1])
        assert [(a["gpu_model"], a["nodes"]) for a in single["alternatives"]] == [("H200", 2)]
        assert single["prefer"] == "cheapest"

    @pytest.mark.parametrize(
        ("body", "field", "says"),
        [
            ({"alternatives": []}, "alternatives", "must list at least one"),
            ({"alternatives": [KIMI[0]] * 9}, "alternatives", "must list at most 8"),
            ({"alternatives": KIMI, "gpu_model": "B300"}, "gpu_model", "not both"),
            ({"alternatives": KIMI, "nodes": 2}, "nodes", "not both"),
            ({}, "gpu_model", "Field required"),
            (
                {"alternatives": [KIMI[0], {**KIMI[1], "gpu_model": "Z9"}]},
                "alternatives.1.gpu_model",
                "unknown GPU model",
            ),
            (
                {"alternatives": [KIMI[0], {**KIMI[1], "providers": ["verda", "quantacloud"]}]},
                "alternatives.1.providers",
                "QuantaCloud makes no clusters",
            ),
            ({"alternatives": KIMI, "prefer": "random"}, "prefer", "cheapest"),
            ({"alternatives": KIMI, "max_total_usd": "60"}, "max_total_usd", "$70.00"),
        ],
    )
    async def test_bad_alternatives_are_a_422_naming_the_field(
        self, client: httpx.AsyncClient, body: dict[str, Any], field: str, says: str
    ) -> None:
        handle = await create_account(client)
        answer = await client.post("/v1/orders", json=body, headers=handle.headers)
        assert answer.status_code == 422, answer.text
        details = answer.json()["error"]["details"]
        assert details[0]["field"] == field and says in details[0]["message"], details
        listed = await client.get("/v1/orders", headers=handle.headers)
        assert listed.json()["data"] == []


class TestDeploying:
    async def test_the_alternative_in_stock_deploys_and_the_order_says_which(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit="200")
        order_id = await place(client, handle, {"alternatives": KIMI})
        await sim.stock(*VERDA_16H200, 1)  # the cluster, not the B300
        running = await reaches(client, handle, order_id, "running", seconds=10)
        assert running["deployment"]["alternative"] == 2
        assert (running["deployment"]["instance_type"], running["deployment"]["nodes"]) == (
            "16H200",
            2,
        )
        assert len(await creates(sim, "verda")) == 1

    async def test_the_cheapest_alternative_in_stock_deploys_and_only_one(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit="100")
        await sim.stock(*HYPER_H100_X2, 1)
        await sim.stock(*HYPER_H100_X1, 1)
        order_id = await place(client, handle, {"alternatives": H100S})  # x2 listed first
        running = await reaches(client, handle, order_id, "running", seconds=10)
        assert running["deployment"]["alternative"] == 2  # x1 is cheaper
        assert [c["sku"] for c in await creates(sim, "hyperstack")] == ["n3-H100x1"]
        # Positive control: the dearer alternative's machine was there all along; another
        # order for it deploys it, and this order never sent a second create.
        other = await place(client, handle, H100S[0])
        await reaches(client, handle, other, "running", seconds=10)
        skus = sorted(c["sku"] for c in await creates(sim, "hyperstack"))
        assert skus == ["n3-H100x1", "n3-H100x2"]

    async def test_prefer_listed_takes_the_first_listed_that_shows_even_if_dearer(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit="100")
        await sim.stock(*HYPER_H100_X2, 1)
        await sim.stock(*HYPER_H100_X1, 1)
        order_id = await place(client, handle, {"alternatives": H100S, "prefer": "listed"})
        running = await reaches(client, handle, order_id, "running", seconds=10)
        assert running["deployment"]["alternative"] == 1
        assert Decimal(running["deployment"]["price_per_hour"]) == Decimal("4.80672")
        assert [c["sku"] for c in await creates(sim, "hyperstack")] == ["n3-H100x2"]

    async def test_an_alternative_above_its_own_cap_is_not_taken(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit="100")
        capped = [H100S[0], {**H100S[1], "max_price_per_hour": "2.00"}]  # x1 costs $2.63
        await sim.stock(*HYPER_H100_X1, 1)
        order_id = await place(client, handle, {"alternatives": capped})

        async def told_above_max() -> list[str] | None:
            answer = await client.get(f"/v1/orders/{order_id}/events", headers=handle.headers)
            said = [e["message"] for e in answer.json() if e["kind"] == "above_max"]
            return said or None

        (line,) = await eventually(told_above_max, 10)
        assert "above your max of $2.00" in line
        assert await creates(sim, "hyperstack") == []
        await sim.stock(*HYPER_H100_X2, 1)  # positive control: the other alternative deploys
        running = await reaches(client, handle, order_id, "running", seconds=10)
        assert running["deployment"]["alternative"] == 1


VERDA_H100 = ("verda", "1H100.80S.30V", "FIN-01")  # $2.59/h -> $2.82 with fees
ACROSS = [
    alternative("H100", 1, "4.00", providers=["verda"]),
    alternative("H100", 2, "6.00", providers=["hyperstack"]),
]


async def offers_shown(client: httpx.AsyncClient, handle: AccountHandle, n: int) -> None:
    """Wait until the latest reads show `n` offers (both providers read: both in the book)."""

    async def shown() -> bool | None:
        answer = await client.get("/v1/offers", headers=handle.headers)
        return True if len(answer.json()["data"]) >= n else None

    await eventually(shown, 10)


class TestTwoProviders:
    async def test_the_first_alternative_to_show_deploys_and_the_other_never_gets_a_create(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        handle = await create_account(client, credit="100")
        order_id = await place(client, handle, {"alternatives": ACROSS})
        await sim.stock(*HYPER_H100_X2, 1)  # the dearer one shows first
        running = await reaches(client, handle, order_id, "running", seconds=10)
        assert running["deployment"]["alternative"] == 2
        await sim.stock(*VERDA_H100, 1)  # the cheaper one, too late
        # Positive control: the Verda machine is there for an order that wants it.
        other = await place(client, handle, ACROSS[0])
        taken = await reaches(client, handle, other, "running", seconds=10)
        assert taken["deployment"]["provider"] == "verda"
        verda = await creates(sim, "verda")
        assert [c["name"] for c in verda] == [f"ap-{other.removeprefix('ord_')}-1"]
        assert len(await creates(sim, "hyperstack")) == 1


class TestBothShowing:
    @pytest.fixture
    def settings(self, settings: Settings) -> Settings:
        """Every provider read even with nobody waiting, so both offers are known at once."""
        return settings.model_copy(update={"history_poll_seconds": 0.2})

    @pytest.mark.parametrize(("prefer", "deployed"), [("cheapest", 1), ("listed", 2)])
    async def test_with_both_showing_the_cheaper_or_the_first_listed_deploys(
        self, client: httpx.AsyncClient, sim: SimControl, prefer: str, deployed: int
    ) -> None:
        handle = await create_account(client, credit="100")
        await sim.stock(*VERDA_H100, 1)
        await sim.stock(*HYPER_H100_X2, 1)
        await offers_shown(client, handle, 2)
        listed = [ACROSS[1], ACROSS[0]] if prefer == "listed" else ACROSS
        order_id = await place(client, handle, {"alternatives": listed, "prefer": prefer})
        running = await reaches(client, handle, order_id, "running", seconds=10)
        chosen = listed[running["deployment"]["alternative"] - 1]
        assert chosen == ACROSS[deployed - 1]
        made = [*await creates(sim, "verda"), *await creates(sim, "hyperstack")]
        assert len(made) == 1  # one order, one machine


class TestSpendLimit:
    async def test_a_limit_below_the_dearer_alternative_never_deploys_it(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        # The report's order: alternatives at $3.00 and $50.00 an hour and a $3.00 limit. Set
        # while its create for the $3 one was in flight (the hour held is $2.63), the limit
        # stays when that machine fails before it runs and the order waits again.
        handle = await create_account(client, credit="100")
        shapes = [
            alternative("H100", 1, "3.00", providers=["hyperstack"]),
            alternative("H100", 8, "50.00", providers=["hyperstack"]),
        ]
        order_id = await place(client, handle, {"alternatives": shapes})
        await sim.fault("hyperstack", "create_delay", seconds=0.8)
        await sim.fault("hyperstack", "fail_after_accept")
        await sim.stock(*HYPER_H100_X1, 1)
        await reaches(client, handle, order_id, "deploying")
        limited = await client.patch(
            f"/v1/orders/{order_id}", json={"max_total_usd": "3.00"}, headers=handle.headers
        )
        assert limited.status_code == 200, limited.text
        await sim.stock(*HYPER_H100_X8, 1)  # $20.27 an hour with fees: within its $50 cap

        async def told_or_sent() -> tuple[list[str], list[str]] | None:
            """What the timeline says of the $20.27 hour passing its total, and the machines
            created, once the order was told or a second create went out."""
            answer = await client.get(f"/v1/orders/{order_id}/events", headers=handle.headers)
            said = [e["message"] for e in answer.json() if e["kind"] == "above_max"]
            told = [line for line in said if "max_total_usd of $3.00" in line]
            skus = [c["sku"] for c in await creates(sim, "hyperstack")]
            return (told, skus) if told or len(skus) > 1 else None

        # The $3 machine failed before it ran (refunded), and the order waits again.
        told, skus = await eventually(told_or_sent, 10)
        assert skus == ["n3-H100x1"]  # never the $20.27 one
        assert len(told) == 1 and "n3-H100x8 at $20.27/h" in told[0]
        assert (await order(client, handle, order_id))["status"] == "waiting"
        # Positive control: the alternative within the limit deploys when it shows again.
        await sim.stock(*HYPER_H100_X1, 1)
        running = await reaches(client, handle, order_id, "running", seconds=10)
        assert running["deployment"]["alternative"] == 1
        assert Decimal(running["charged_usd"]) <= Decimal("3.00")
        skus = [c["sku"] for c in await creates(sim, "hyperstack")]
        assert skus == ["n3-H100x1", "n3-H100x1"]
