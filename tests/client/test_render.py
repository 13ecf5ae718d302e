"""What the client prints for people: amounts exact, times in UTC, text never read as markup."""

from decimal import Decimal

import pytest

from app.client import render
from tests.client.fake_stream import order_json


@pytest.mark.parametrize(
    ("amount", "shown"),
    [("46.50", "$46.50"), ("1234567.10", "$1,234,567.10"), ("0.000001", "$0.000001"),
     (Decimal("20.01"), "$20.01"), ("-48.00", "-$48.00"), (None, "-"), ("n/a", "n/a")],
)  # fmt: skip
def test_amounts_are_shown_exactly_as_decimals(amount: object, shown: str) -> None:
    assert render.usd(amount) == shown


def test_an_amount_never_goes_through_float() -> None:
    # 0.1 + 0.2 as floats is 0.30000000000000004; as the API's strings it is what was sent
    assert render.usd("0.30") == "$0.30" and render.usd("10.10") == "$10.10"


@pytest.mark.parametrize(
    ("timestamp", "shown"),
    [("2026-11-29T14:23:55.225207Z", "2026-11-29 14:23:55Z"),
     ("2026-11-29T16:23:55+02:00", "2026-11-29 14:23:55Z"), (None, "-"), ("soon", "soon")],
)  # fmt: skip
def test_times_are_utc_to_the_second(timestamp: str | None, shown: str) -> None:
    assert render.when(timestamp) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0, "0 s"), (40, "40 s"), (300, "5 min"), (83_880, "23 h 18 min"), (183_600, "2 d 3 h")],
)
def test_durations_use_the_two_largest_units(seconds: int, shown: str) -> None:
    assert render.duration(seconds) == shown


def test_an_order_and_its_machine_in_words() -> None:
    order = order_json("ord_1", "running", ip="10.0.0.5")
    assert render.machine_wanted(order) == "1x H100 on hyperstack, up to $3.00/h"
    assert render.machine_got(order["deployment"]) == (
        "hyperstack CANADA-1 n3-H100x1 at $2.62/h, IP 10.0.0.5"
    )
    assert render.order_ip(order) == "10.0.0.5"
    assert render.machine_got(None) == "-" and render.order_ip(order_json("o", "waiting")) is None


def test_service_text_is_printed_as_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    order = {**order_json("ord_1", "waiting"), "name": "[red]x[/red] :smile:"}
    render.console().print(render.orders_table([order]))
    out = capsys.readouterr().out
    assert "[red]x[/red] :smile:" in out and "\x1b[" not in out  # no markup, emoji or colour


def test_a_stream_event_is_one_line() -> None:
    event = {
        "id": 7, "type": "order.running", "kind": "running", "order_id": "ord_1",
        "timestamp": "2026-12-01T10:00:03Z", "message": "Running at\n10.0.0.5.", "data": None,
    }  # fmt: skip
    assert render.stream_line(event) == (
        "2026-12-01 10:00:03Z  ord_1  order.running  Running at 10.0.0.5."
    )
    account_event = {**event, "type": "account.endpoint_disabled", "order_id": None}
    assert "  -  account.endpoint_disabled  " in render.stream_line(account_event)


@pytest.mark.parametrize(
    ("login_ip", "node_ips", "entry"),
    [
        ("203.0.113.9", ["10.0.0.2", "10.0.0.3"], "login"),  # Verda: a jump host apart
        ("203.0.113.4", ["203.0.113.4", "203.0.113.5"], "first"),  # nodes put together
    ],
)
def test_a_cluster_is_reached_through_its_login_node_only_if_it_has_one(
    login_ip: str, node_ips: list[str], entry: str
) -> None:
    order = order_json("ord_1", "running", ip=login_ip)
    order["deployment"]["nodes"] = 2
    order |= {"login_ip": login_ip, "machines": [{"ip": ip} for ip in node_ips]}
    assert render.entry_node(order) == entry
    got = render.machine_got(order["deployment"], entry=render.entry_node(order))
    assert got.endswith(f"(2 nodes) at $2.62/h, {entry} IP {login_ip}")
