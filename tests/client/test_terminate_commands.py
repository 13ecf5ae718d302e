"""`orders terminate` and `orders limits` against a running service (no watcher: the order's
machine is put in place through the services, as the deploy would), and the account's spend."""

import asyncio
import io
from decimal import Decimal

import pytest

from app.core.catalogue import Provider
from app.providers.base import VM, Offer, VMState
from app.services import attempts, claims
from app.storage.db import create_engine, create_sessionmaker, session_scope
from tests.client.cli import Account, Autoprovision, place

OFFER = Offer(Provider("hyperstack"), "CANADA-1", "n3-B300x8", "B300", 8, Decimal("40.00"))


def runs(database_url: str, order_id: str) -> None:
    """The order's machine is deployed and running at Hyperstack, its first hour ($40) paid."""

    async def deploy() -> None:
        engine = create_engine(database_url)
        maker = create_sessionmaker(engine)
        try:
            async with session_scope(maker) as session:
                intent = await claims.claim(
                    session, order_id=order_id, offer=OFFER, price_with_fees=Decimal("40.00")
                )
            assert intent is not None
            vm = VM(Provider("hyperstack"), "412001", VMState.RUNNING, "ACTIVE", ip="203.0.113.9")
            async with session_scope(maker) as session:
                await attempts.settle_created(session, attempt_id=intent.attempt_id, vm=vm)
            async with session_scope(maker) as session:
                await attempts.settle_running(session, attempt_id=intent.attempt_id, vm=vm)
        finally:
            await engine.dispose()

    asyncio.run(deploy())


@pytest.fixture
def running(autoprovision: Autoprovision, account: Account, database_url: str) -> str:
    order_id = place(autoprovision)
    runs(database_url, order_id)
    return order_id


class TestTerminate:
    def test_with_yes_it_terminates_and_says_how_to_follow_it(
        self, autoprovision: Autoprovision, running: str
    ) -> None:
        ran = autoprovision("orders", "terminate", running, "--yes")
        assert ran.code == 0, ran.err
        assert ran.lines() == [
            f"Terminating {running} (terminating).",
            f"Follow it: autoprovision watch {running} --until terminated",
        ]
        again = autoprovision("orders", "terminate", running, "--yes", "--json").json()
        assert (again["status"], again["terminate_reason"]) == ("terminating", "requested")

    def test_it_asks_first_and_no_keeps_the_machine(
        self, autoprovision: Autoprovision, running: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
        kept = autoprovision("orders", "terminate", running)
        assert kept.code == 1 and "Terminate" in kept.out and "cannot be brought back" in kept.out
        assert autoprovision("orders", "get", running, "--json").json()["status"] == "running"
        monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # the control: yes terminates
        ended = autoprovision("orders", "terminate", running)
        assert ended.code == 0 and f"Terminating {running} (terminating)." in ended.out

    def test_a_waiting_order_is_refused_with_exit_1_saying_to_cancel_it(
        self, autoprovision: Autoprovision, account: Account
    ) -> None:
        order_id = place(autoprovision)
        for asked in ((), ("--yes",)):  # not asked first: there is nothing to terminate
            ran = autoprovision("orders", "terminate", order_id, *asked)
            assert ran.code == 1 and ran.out == "", asked
            assert ran.err.strip() == (
                f"autoprovision: {order_id} is waiting: no machine runs yet; cancel it with "
                f"`autoprovision orders cancel {order_id}`"
            ), asked

    def test_cancelling_a_running_order_says_to_terminate_it(
        self, autoprovision: Autoprovision, running: str
    ) -> None:
        ran = autoprovision("orders", "cancel", running)
        assert ran.code == 1
        assert f"`autoprovision orders terminate {running}` ends its machine" in ran.err

    def test_get_shows_how_to_reach_it_and_what_it_costs(
        self, autoprovision: Autoprovision, running: str
    ) -> None:
        ran = autoprovision("orders", "get", running)
        assert ran.code == 0, ran.err
        assert "ssh ubuntu@203.0.113.9" in ran.out
        assert "$40.00" in ran.out and "Paid until" in ran.out
        shown = autoprovision("account")
        # 1.5 billed hours of demo mode's minute-long ones: the runway on the clock.
        assert "$40.00/h" in shown.out and "1 min 30 s (low: top up)" in shown.out


class TestLimits:
    def test_limits_are_set_and_removed(self, autoprovision: Autoprovision, running: str) -> None:
        ran = autoprovision(
            "orders", "limits", running, "--max-runtime-hours", "12", "--max-total", "500", "--json"
        )
        assert ran.code == 0, ran.err
        order = ran.json()
        assert (order["max_runtime_hours"], order["max_total_usd"]) == (12.0, "500.00")
        assert order["terminates_at"] is not None
        shown = autoprovision("orders", "limits", running, "--max-runtime-hours", "none")
        assert shown.code == 0 and "Max runtime" not in shown.out and "$500.00" in shown.out

    def test_limits_are_given_at_placement_too(
        self, autoprovision: Autoprovision, account: Account
    ) -> None:
        order_id = place(autoprovision, "--max-runtime-hours", "0.5", "--max-total", "91")
        (order,) = account.orders()
        assert (order["id"], order["max_runtime_hours"], order["max_total_usd"]) == (
            order_id,
            0.5,
            "91.00",
        )

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            ((), "give --max-runtime-hours or --max-total"),
            (("--max-runtime-hours", "soon"), "is not a number of hours"),
            (("--max-total", "lots"), "is not an amount"),
        ],
    )
    def test_bad_limits_are_exit_2_before_any_request(
        self, autoprovision: Autoprovision, running: str, args: tuple[str, ...], message: str
    ) -> None:
        ran = autoprovision("orders", "limits", running, *args)
        said = " ".join(ran.err.replace("│", " ").split())  # Rich wraps it in a box
        assert ran.code == 2 and message in said, ran.err

    def test_a_total_below_what_was_charged_is_the_apis_422_and_exit_2(
        self, autoprovision: Autoprovision, running: str
    ) -> None:
        ran = autoprovision("orders", "limits", running, "--max-total", "10")
        assert ran.code == 2
        assert "max_total_usd" in ran.err and "$40.00" in ran.err
