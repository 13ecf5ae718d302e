"""The watcher end to end: REST API in, simulators out, with the real adapters in between.

No test sleeps to give the watcher time: each waits until the watcher has provably looked
(`polled`: more stock reads of the provider, each followed by its deploy pass), and a test that
something did not happen also shows, in the same test, the setup without the difference doing it.
"""

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Provider
from app.core.states import HoldStatus
from app.providers.registry import poll_periods
from app.settings import Settings
from app.simulators.control import SimControl
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Attempt, Hold
from tests.factories import ADMIN, AccountHandle, create_account, order_body
from tests.waiting import eventually, poll_count, polled
from tests.watcher.orders import (
    HYPER_H100,
    HYPER_H100_X8,
    VERDA_H100,
    account_view,
    events,
    h100,
    order,
    place,
    reaches,
)


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def vm_name(order_id: str) -> str:
    """The name the watcher gives the first create of an order."""
    return f"ap-{order_id.removeprefix('ord_')}-1"


async def create_names(sim: SimControl, provider: str) -> list[str]:
    return [c["name"] for c in await sim.creates(provider)]


class TestDeploy:
    async def test_stock_appears_the_order_deploys_and_runs(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        account = await create_account(client, credit="10")
        order_id = await place(client, account, h100(ssh_public_key=None))
        await polled("hyperstack")
        assert await sim.creates("hyperstack") == []  # nothing in stock: nothing sent
        await sim.stock(*HYPER_H100, 1)
        running = await reaches(client, account, order_id, "running")
        attempt = running["deployment"]
        assert (attempt["provider"], attempt["region"], attempt["instance_type"]) == (
            "hyperstack",
            "CANADA-1",
            "n3-H100x1",
        )
        assert attempt["price_per_hour"] == "2.40672"  # $2.40 and its public IP
        assert attempt["price_per_hour_with_fees"] == "2.63"
        assert attempt["ip"] and attempt["status"] == "running"
        (create,) = await sim.creates("hyperstack")
        assert create["outcome"] == "created"
        assert create["name"] == vm_name(order_id)
        assert await events(client, account, order_id) == [
            "placed",
            "create_sent",
            "deployed",
            "running",
        ]
        balance = await account_view(client, account)
        assert (balance["balance"], balance["held"]) == ("7.37", "0.00")

    async def test_each_order_takes_the_cheapest_matching_offer(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        account = await create_account(client, credit="10")
        await place(client, account, order_body(providers=["verda", "hyperstack"]))  # 8x B300
        await sim.stock(*VERDA_H100, 1)
        await sim.stock(*HYPER_H100, 1)
        await eventually(lambda: _offered_by(client, account, {"verda", "hyperstack"}))
        order_id = await place(client, account, h100())
        deployed = await reaches(client, account, order_id, "running")
        assert deployed["deployment"]["provider"] == "hyperstack"  # $2.63 beats Verda's $2.82
        assert await sim.creates("verda") == []

    async def test_the_oldest_order_gets_the_stock_and_quantity_is_respected(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        account = await create_account(client, credit="200")
        body = order_body(gpu_model="H100", gpu_count=8, providers=["hyperstack"])
        ids = [await place(client, account, body) for _ in range(3)]
        await sim.stock(*HYPER_H100_X8, 2)
        for order_id in ids[:2]:
            await reaches(client, account, order_id, "running")
        await polled("hyperstack")  # the third still waits, so Hyperstack is still read
        assert (await order(client, account, ids[2]))["status"] == "waiting"
        # The two creates go out at once: which reaches the provider first is not ordered.
        assert sorted(await create_names(sim, "hyperstack")) == sorted(vm_name(i) for i in ids[:2])
        # Control: one more unit, and the third deploys.
        await sim.stock(*HYPER_H100_X8, 1)
        await reaches(client, account, ids[2], "running")
        assert sorted(await create_names(sim, "hyperstack")) == sorted(vm_name(i) for i in ids)

    @pytest.mark.parametrize(
        ("row_listed", "price"), [(True, "2.40672"), (False, "2.40")], ids=["ip row", "no row"]
    )
    async def test_a_hyperstack_order_matches_at_the_price_its_vm_is_billed_public_ip_included(
        self, client: httpx.AsyncClient, sim: SimControl, row_listed: bool, price: str
    ) -> None:
        """Every VM gets a public IP: its pricebook row is in the offer, or billed nowhere."""
        await sim.config("hyperstack", public_ip_priced=row_listed)
        account = await create_account(client, credit="10")
        order_id = await place(client, account, h100(providers=["hyperstack"]))
        await sim.stock(*HYPER_H100, 1)
        running = await reaches(client, account, order_id, "running")
        (vm,) = await sim.vms("hyperstack")
        assert running["deployment"]["price_per_hour"] == vm["price_per_hour"] == price

    async def test_price_with_fees_at_the_max_deploys_one_cent_above_waits(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        account = await create_account(client, credit="10")
        too_low = await place(
            client, account, h100(providers=["hyperstack"], max_price_per_hour="2.62")
        )
        at_max = await place(
            client, account, h100(providers=["hyperstack"], max_price_per_hour="2.63")
        )
        await sim.stock(*HYPER_H100, 2)
        await reaches(client, account, at_max, "running")
        assert (await order(client, account, too_low))["status"] == "waiting"
        # Told why (notes are written at most once a second, after the pass's creates).
        await eventually(lambda: _has_event(client, account, too_low, "above_max"))
        assert (await order(client, account, too_low))["status"] == "waiting"

    async def test_orders_are_only_sent_to_providers_they_accept(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        account = await create_account(client, credit="10")
        elsewhere = await place(client, account, h100(providers=["quantacloud"]))
        await sim.stock(*HYPER_H100, 2)
        # Control: the same order accepting Hyperstack, placed later, deploys from that very
        # stock. Being older, the first would have been served first had it been eligible.
        control = await place(client, account, h100(providers=["hyperstack"]))
        await reaches(client, account, control, "running")
        assert await create_names(sim, "hyperstack") == [vm_name(control)]
        assert (await order(client, account, elsewhere))["status"] == "waiting"


class TestMoney:
    async def test_a_balance_of_exactly_one_hour_deploys(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        account = await create_account(client, credit="2.63")
        order_id = await place(client, account, h100(providers=["hyperstack"]))
        await sim.stock(*HYPER_H100, 1)
        await reaches(client, account, order_id, "running")
        balance = await account_view(client, account)
        assert (balance["balance"], balance["available"]) == ("0.00", "0.00")

    async def test_one_cent_short_keeps_waiting_and_says_so_once(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        account = await create_account(client, credit="2.62")
        order_id = await place(client, account, h100(providers=["hyperstack"]))
        await sim.stock(*HYPER_H100, 1)
        await eventually(lambda: _has_event(client, account, order_id, "short_of_funds"))
        await polled("hyperstack")  # more polls see the same situation
        kinds = await events(client, account, order_id)
        assert kinds.count("short_of_funds") == 1
        assert (await order(client, account, order_id))["status"] == "waiting"
        assert await sim.creates("hyperstack") == []
        await client.post(
            f"/v1/accounts/{account.id}/credits", json={"amount": "0.01"}, headers=ADMIN
        )
        await reaches(client, account, order_id, "running")


async def _has_event(
    client: httpx.AsyncClient, account: AccountHandle, order_id: str, kind: str
) -> bool:
    return kind in await events(client, account, order_id)


async def _offered_by(
    client: httpx.AsyncClient, account: AccountHandle, providers: set[str]
) -> bool:
    """GET /v1/offers shows H100 stock from each of `providers` (the watcher has read them)."""
    answer = await client.get("/v1/offers?gpu_model=h100", headers=account.headers)
    return {o["provider"] for o in answer.json()["data"]} >= providers


class TestProviderTrouble:
    async def test_a_capacity_error_puts_the_order_back_and_cools_the_offer(
        self, client: httpx.AsyncClient, sim: SimControl, engine: AsyncEngine
    ) -> None:
        account = await create_account(client, credit="10")
        order_id = await place(client, account, h100(providers=["hyperstack"]))
        await sim.fault("hyperstack", "capacity_race")
        await sim.stock(*HYPER_H100, 1)
        await eventually(lambda: _has_event(client, account, order_id, "no_capacity"))
        kinds = await events(client, account, order_id)
        assert kinds[:3] == ["placed", "create_sent", "no_capacity"]
        # the offer cools down (0.5 s here), then the order gets it
        await reaches(client, account, order_id, "running")
        outcomes = [c["outcome"] for c in await sim.creates("hyperstack")]
        assert outcomes == ["capacity_race", "created"]
        # The refused create's hour was released, the second's paid. (Read from the holds: the
        # balance read just after the refusal raced the second claim once the cooldown ended.)
        async with session_scope(create_sessionmaker(engine)) as session:
            holds = (
                await session.execute(
                    select(Attempt.number, Hold.status)
                    .join(Hold, Hold.id == Attempt.hold_id)
                    .where(Attempt.order_id == order_id)
                    .order_by(Attempt.number)
                )
            ).all()
        assert [tuple(h) for h in holds] == [(1, HoldStatus.RELEASED), (2, HoldStatus.DEBITED)]

    async def test_a_vm_that_fails_before_running_is_deleted_and_the_order_waits_again(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        account = await create_account(client, credit="10")
        order_id = await place(client, account, h100(providers=["hyperstack"]))
        await sim.fault("hyperstack", "fail_after_accept")
        await sim.stock(*HYPER_H100, 1)
        await eventually(lambda: _has_event(client, account, order_id, "vm_failed"))
        shown = await order(client, account, order_id)
        assert shown["status"] == "waiting"
        balance = await account_view(client, account)
        assert (balance["balance"], balance["held"]) == ("10.00", "0.00")  # refunded
        await eventually(lambda: _all_gone(sim))
        await sim.stock(*HYPER_H100, 1)
        retried = await reaches(client, account, order_id, "running")
        assert retried["deployment"]["status"] == "running"

    async def test_an_unclear_create_is_looked_up_and_adopted_never_sent_twice(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        account = await create_account(client, credit="10")
        order_id = await place(client, account, h100(providers=["hyperstack"]))
        await sim.fault("hyperstack", "create_error_after_commit")
        await sim.stock(*HYPER_H100, 5)
        running = await reaches(client, account, order_id, "running")
        kinds = await events(client, account, order_id)
        assert "outcome_unknown" in kinds and "adopted" in kinds
        (vm,) = await sim.vms("hyperstack")
        assert running["deployment"]["provider_vm_id"] == str(vm["id"])
        assert [c["outcome"] for c in await sim.creates("hyperstack")] == ["error_after_commit"]

    async def test_a_rate_limited_provider_does_not_slow_another(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        account = await create_account(client, credit="10")
        limited = metric("autoprovision_poll_errors_total", provider="verda", kind="rate_limited")
        await sim.fault("verda", "http_429", count=1000, seconds=30)
        order_id = await place(client, account, h100(providers=["verda", "hyperstack"]))

        async def verda_told_to_wait() -> bool:
            now = metric("autoprovision_poll_errors_total", provider="verda", kind="rate_limited")
            return now > limited

        await eventually(verda_told_to_wait)  # Verda is now paused for 30 s
        started = time.monotonic()
        await sim.stock(*HYPER_H100, 1)
        await reaches(client, account, order_id, "deployed", seconds=10)
        # Far inside Verda's 30 s pause (a second or two on a loaded machine): not behind it.
        assert time.monotonic() - started < 10


async def _all_gone(sim: SimControl) -> bool:
    """Every VM at Hyperstack is being deleted or is deleted."""
    return all(vm["status"] in ("DELETING", "DELETED") for vm in await sim.vms("hyperstack"))


class TestLifecycle:
    async def test_an_order_past_its_expiry_expires(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        account = await create_account(client, credit="10")
        # Far enough ahead to pass validation on a loaded machine, near enough to wait for.
        soon = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
        order_id = await place(client, account, h100(expires_at=soon))
        await reaches(client, account, order_id, "expired")
        assert (await events(client, account, order_id))[-1] == "expired"
        await sim.stock(*HYPER_H100, 2)
        # Control: the same order without an expiry, placed later, gets the stock; the expired
        # one, older, would have been served first had it still been waiting.
        control = await place(client, account, h100())
        await reaches(client, account, control, "running")
        assert await create_names(sim, "hyperstack") == [vm_name(control)]
        assert (await order(client, account, order_id))["status"] == "expired"

    async def test_a_cancelled_order_is_not_deployed(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        account = await create_account(client, credit="10")
        order_id = await place(client, account, h100())
        answer = await client.post(f"/v1/orders/{order_id}/cancel", headers=account.headers)
        assert answer.status_code == 200, answer.text
        await sim.stock(*HYPER_H100, 2)
        # Control: a live order of the same shape, placed later, gets the stock; the cancelled
        # one, older, would have been served first had it still been waiting.
        control = await place(client, account, h100())
        await reaches(client, account, control, "running")
        assert await create_names(sim, "hyperstack") == [vm_name(control)]
        assert (await order(client, account, order_id))["status"] == "cancelled"


class TestPolling:
    async def test_nobody_waiting_means_no_polling(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        before = poll_count("quantacloud")
        skipped = metric("autoprovision_polls_skipped_total", provider="quantacloud")

        async def looked_twice() -> bool:
            now = metric("autoprovision_polls_skipped_total", provider="quantacloud")
            return now >= skipped + 2

        await eventually(looked_twice)  # the poller has decided twice whether to read
        assert poll_count("quantacloud") == before
        # Control: an order accepting QuantaCloud, and its stock is read.
        account = await create_account(client, credit="10")
        await place(client, account, h100(providers=["quantacloud"]))
        await polled("quantacloud", times=1)

    async def test_polls_do_not_grow_with_the_number_of_orders(
        self, client: httpx.AsyncClient, sim: SimControl, settings: Settings
    ) -> None:
        period = poll_periods(settings)[Provider("quantacloud")]
        account = await create_account(client, credit="10")
        await place(client, account, h100(providers=["quantacloud"]))
        one = await _seconds_per_poll("quantacloud")
        for _ in range(40):
            await place(client, account, h100(providers=["quantacloud"]))
        many = await _seconds_per_poll("quantacloud")
        # One read per period however many orders wait (a read per order would be 41 times
        # as quick). Reads begin a full period apart; the slack is for the reads' own length.
        assert one >= 0.7 * period
        assert many >= 0.7 * period

    async def test_offers_show_the_latest_stock_with_fees(
        self, client: httpx.AsyncClient, sim: SimControl
    ) -> None:
        account = await create_account(client, credit="1")  # too little to deploy
        other = await create_account(client, "other", credit="1")
        fits = await place(client, account, h100(providers=["hyperstack"]))
        await place(client, account, h100(providers=["hyperstack"], max_price_per_hour="2.50"))
        await place(client, account, h100(providers=["verda"]))
        await place(client, other, h100(providers=["hyperstack"]))
        await sim.stock(*HYPER_H100, 3)

        async def shown() -> list[dict[str, Any]]:
            answer = await client.get("/v1/offers?gpu_model=h100", headers=account.headers)
            data: list[dict[str, Any]] = answer.json()["data"]
            return data

        (offer,) = await eventually(shown)
        assert (offer["provider"], offer["sku"], offer["available"]) == (
            "hyperstack",
            "n3-H100x1",
            3,
        )
        assert (offer["price_per_hour"], offer["price_per_hour_with_fees"]) == ("2.40672", "2.63")
        assert offer["matching_orders"] == [fits]  # only the caller's, only those it satisfies

    async def test_metrics_are_served(self, client: httpx.AsyncClient, sim: SimControl) -> None:
        answer = await client.get("/metrics")
        assert answer.status_code == 200
        for name in (
            "autoprovision_poll_seconds",
            "autoprovision_polls_skipped_total",
            "autoprovision_orders",
            "autoprovision_creates_total",
            "autoprovision_stock_to_create_seconds",
            "autoprovision_deploy_to_running_seconds",
        ):
            assert name in answer.text


async def _seconds_per_poll(provider: str, polls: int = 5) -> float:
    """Measured: from the end of one read of `provider` to the end of `polls` more, per read."""
    await polled(provider, times=1)
    started = time.monotonic()
    await polled(provider, times=polls)
    return (time.monotonic() - started) / polls
