"""`autoprovision watch` against a stand-in for the event stream that keeps its contract
(`fake_stream.py`): one line per event, `--until` and its exit codes, resuming a dropped stream
with `Last-Event-ID`, `--timeout`, and every refusal as one line."""

import json
from collections.abc import Iterator
from typing import Any

import pytest

from app.client import watch
from app.client.api import KEY_ENV, URL_ENV
from tests.client.cli import Autoprovision, Background
from tests.client.fake_stream import KEY, FakeStream, order_json
from tests.servers import serve_in_thread
from tests.waiting import eventually_sync

ORDER = "ord_01kfakeorder0000000000000"
OTHER = "ord_01kotherorder000000000000"
RUNNING_LINE = f"{ORDER} is running at 10.0.0.5 (hyperstack CANADA-1 n3-H100x1 at $2.62/h"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeStream]:
    """The stand-in on loopback, heartbeats every 50 ms, with ORDER waiting; the commands find
    it and its key in the environment."""
    stream = FakeStream(ping_seconds=0.05)
    stream.put_order(order_json(ORDER, "waiting"))
    with serve_in_thread(stream.app()) as url:
        monkeypatch.setenv(URL_ENV, url)
        monkeypatch.setenv(KEY_ENV, KEY)
        yield stream


def connected(fake: FakeStream, *requests: str) -> None:
    """Wait until the command has made exactly these requests."""
    eventually_sync(lambda: fake.requests == list(requests), seconds=10)


def test_until_running_follows_only_its_order_and_prints_the_ip(
    autoprovision: Autoprovision, fake: FakeStream
) -> None:
    command = Background(autoprovision, "watch", ORDER, "--until", "running")
    connected(fake, "stream -", f"order {ORDER}")  # the stream first, then the order
    fake.publish("deploying", order_json(ORDER, "deploying"), "create sent.")
    fake.publish("running", order_json(OTHER, "running", ip="10.9.9.9"), "Running at 10.9.9.9.")
    fake.publish("deployed", order_json(ORDER, "deployed"), "Deployed.")
    fake.publish("running", order_json(ORDER, "running", ip="10.0.0.5"), "Running at 10.0.0.5.")
    ran = command.result()
    assert ran.code == 0, ran.err
    # Where it stands comes first, at once: nothing waits silently for the first event.
    status, *lines = ran.lines()
    assert status == (
        f"{ORDER} is waiting (placed 2026-12-01 09:59:00Z); wants 1x H100 on hyperstack, "
        "up to $3.00/h; expected wait: unknown"
    )
    assert [line.split("  ")[1:] for line in lines[:3]] == [
        [ORDER, "order.deploying", "create sent."],
        [ORDER, "order.deployed", "Deployed."],
        [ORDER, "order.running", "Running at 10.0.0.5."],
    ]
    assert lines[3].startswith(RUNNING_LINE) and len(lines) == 4
    assert OTHER not in ran.out and ran.err == ""


def test_an_order_that_runs_already_is_answered_at_once(
    autoprovision: Autoprovision, fake: FakeStream
) -> None:
    fake.put_order(order_json(ORDER, "running", ip="10.0.0.5"))
    ran = autoprovision("watch", ORDER, "--until", "running")
    assert ran.code == 0 and ran.out.startswith(RUNNING_LINE) and len(ran.lines()) == 1
    assert fake.requests == ["stream -", f"order {ORDER}"]


def test_a_change_between_connecting_and_reading_the_order_is_not_missed(
    autoprovision: Autoprovision, fake: FakeStream
) -> None:
    running = order_json(ORDER, "running", ip="10.0.0.5")
    fake.on_order_read = lambda: fake.publish("running", running, "Running at 10.0.0.5.")
    ran = autoprovision("watch", ORDER, "--until", "running")  # the read says "waiting"
    assert ran.code == 0, ran.err
    assert ran.lines()[0].startswith(f"{ORDER} is waiting")  # as read
    assert "order.running  Running at 10.0.0.5." in ran.lines()[1]
    assert ran.lines()[2].startswith(RUNNING_LINE)


def test_the_event_type_decides_not_a_newer_order_in_its_data(
    autoprovision: Autoprovision, fake: FakeStream
) -> None:
    command = Background(autoprovision, "watch", ORDER, "--until", "running")
    connected(fake, "stream -", f"order {ORDER}")
    # published late: by then the order was cancelled, and its own event comes next
    fake.publish("placed", order_json(ORDER, "cancelled"), "Order placed.")
    fake.publish("cancelled", order_json(ORDER, "cancelled"), "Cancelled by you.")
    ran = command.result()
    assert ran.code == 1
    assert [line.split("  ")[2] for line in ran.lines()[1:]] == ["order.placed", "order.cancelled"]


def test_until_deployed_is_reached_by_deployed(
    autoprovision: Autoprovision, fake: FakeStream
) -> None:
    command = Background(autoprovision, "watch", ORDER, "--until", "deployed")
    connected(fake, "stream -", f"order {ORDER}")
    fake.publish("deployed", order_json(ORDER, "deployed"), "Deployed.")
    ran = command.result()
    assert ran.code == 0
    assert ran.lines()[-1] == f"{ORDER} is deployed: hyperstack CANADA-1 n3-H100x1 at $2.62/h"


def test_until_terminated_waits_through_terminating_and_says_what_it_cost(
    autoprovision: Autoprovision, fake: FakeStream
) -> None:
    fake.put_order(order_json(ORDER, "running", ip="10.0.0.5"))
    command = Background(autoprovision, "watch", ORDER, "--until", "terminated")
    connected(fake, "stream -", f"order {ORDER}")
    fake.publish("terminating", order_json(ORDER, "terminating"), "Terminating.")
    ended = {**order_json(ORDER, "terminated"), "charged_usd": "7.59"}
    fake.publish("terminated", ended, "Terminated: refunded $37.93.")
    ran = command.result()
    assert ran.code == 0, ran.err
    assert ran.lines()[0].startswith(f"{ORDER} is running (placed")
    assert [line.split("  ")[2] for line in ran.lines()[1:3]] == [
        "order.terminating",
        "order.terminated",
    ]
    assert ran.lines()[-1] == f"{ORDER} is terminated: $7.59 charged in all"


def _reported(stage: str, detail: str | None = None) -> dict[str, Any]:
    """ORDER running, its machine having reported `stage`."""
    order = order_json(ORDER, "running", ip="10.0.0.5")
    order["deployment"] = {**order["deployment"], "stage": stage, "stage_detail": detail}
    order["serve_tunnel"] = "ssh -N -L 8000:127.0.0.1:8000 root@10.0.0.5"
    return order


def test_until_ready_waits_past_running_for_the_machine_to_say_its_model_answers(
    autoprovision: Autoprovision, fake: FakeStream
) -> None:
    command = Background(autoprovision, "watch", ORDER, "--until", "ready")
    connected(fake, "stream -", f"order {ORDER}")
    fake.publish("running", order_json(ORDER, "running", ip="10.0.0.5"), "Running.")
    fake.publish("progress", _reported("downloading"), "The machine reports: downloading.")
    fake.publish("ready", _reported("ready"), "The machine reports: ready.")
    ran = command.result()
    assert ran.code == 0, ran.err
    assert [line.split("  ")[2] for line in ran.lines()[1:4]] == [
        "order.running",  # running is not ready: the watch goes on
        "order.progress",
        "order.ready",
    ]
    assert ran.lines()[-1] == (
        f"{ORDER} is ready: hyperstack CANADA-1 n3-H100x1 at $2.62/h, IP 10.0.0.5; reach it "
        "with ssh -N -L 8000:127.0.0.1:8000 root@10.0.0.5"
    )


def test_until_ready_is_exit_1_when_the_machine_reports_it_failed(
    autoprovision: Autoprovision, fake: FakeStream
) -> None:
    fake.put_order(_reported("failed", "driver_too_old: driver 535"))  # as read: at once
    ran = autoprovision("watch", ORDER, "--until", "ready")
    assert ran.code == 1
    assert ran.err == (
        f"autoprovision: {ORDER}'s machine reported it failed (driver_too_old: driver 535); "
        "it will not get to ready\n"
    )
    fake.put_order(_reported("ready"))
    assert autoprovision("watch", ORDER, "--until", "ready").code == 0  # control


@pytest.mark.parametrize(("until", "status"), [("terminated", "lost"), ("running", "terminating")])
def test_an_order_that_can_no_longer_get_there_is_exit_1(
    autoprovision: Autoprovision, fake: FakeStream, until: str, status: str
) -> None:
    command = Background(autoprovision, "watch", ORDER, "--until", until)
    connected(fake, "stream -", f"order {ORDER}")
    fake.publish(status, order_json(ORDER, status), f"The order is {status}.")
    ran = command.result()
    assert ran.code == 1
    assert ran.err == f"autoprovision: {ORDER} is {status}; it will not get to {until}\n"


@pytest.mark.parametrize("status", ["failed", "cancelled", "expired"])
def test_an_order_that_ends_otherwise_is_exit_1(
    autoprovision: Autoprovision, fake: FakeStream, status: str
) -> None:
    command = Background(autoprovision, "watch", ORDER, "--until", "running")
    connected(fake, "stream -", f"order {ORDER}")
    fake.publish(status, order_json(ORDER, status), f"The order is {status}.")
    ran = command.result()
    assert ran.code == 1
    assert f"order.{status}  The order is {status}." in ran.out
    assert ran.err == f"autoprovision: {ORDER} is {status}; it will not get to running\n"
    fake.requests.clear()
    again = autoprovision("watch", ORDER, "--until", "running")  # already ended, at the read
    assert again.code == 1 and again.out == "" and f"{ORDER} is {status}" in again.err


def test_json_prints_each_event_then_the_order(
    autoprovision: Autoprovision, fake: FakeStream
) -> None:
    command = Background(autoprovision, "watch", ORDER, "--until", "running", "--json")
    connected(fake, "stream -", f"order {ORDER}")
    first = fake.publish("deploying", order_json(ORDER, "deploying"), "create sent.")
    fake.publish("running", order_json(ORDER, "running", ip="10.0.0.5"), "Running at 10.0.0.5.")
    ran = command.result()
    assert ran.code == 0
    events = [json.loads(line) for line in ran.lines()]
    assert [e["id"] for e in events[:2]] == [first, first + 1]
    assert events[1]["type"] == "order.running" and events[1]["data"]["status"] == "running"
    assert events[2]["id"] == ORDER and events[2]["deployment"]["ip"] == "10.0.0.5"
    assert len(events) == 3


def test_a_dropped_stream_resumes_after_the_last_event_without_gap_or_repeat(
    autoprovision: Autoprovision, fake: FakeStream
) -> None:
    fake.drop_after = 1  # every stream ends after one event
    command = Background(autoprovision, "watch", ORDER, "--until", "running")
    connected(fake, "stream -", f"order {ORDER}")
    first = fake.publish("deploying", order_json(ORDER, "deploying"), "create sent.")
    fake.publish("deployed", order_json(ORDER, "deployed"), "Deployed.")
    fake.publish("running", order_json(ORDER, "running", ip="10.0.0.5"), "Running at 10.0.0.5.")
    ran = command.result()
    assert ran.code == 0, ran.err
    assert [line.split("  ")[2] for line in ran.lines()[1:4]] == [
        "order.deploying", "order.deployed", "order.running",
    ]  # fmt: skip
    assert fake.streams() == ["-", str(first), str(first + 1)]
    assert fake.requests.count(f"order {ORDER}") == 1  # nothing to catch up on by reading it


def test_a_stream_that_cannot_be_had_again_is_given_up_on_with_exit_3(
    autoprovision: Autoprovision, fake: FakeStream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch, "RECONNECT_PAUSES_SECONDS", (0.01, 0.01, 0.01))
    fake.drop_after = 1
    command = Background(autoprovision, "watch", ORDER, "--until", "running")
    connected(fake, "stream -", f"order {ORDER}")
    fake.refuse = (503, "overloaded")
    event_id = fake.publish("deploying", order_json(ORDER, "deploying"), "create sent.")
    ran = command.result()
    assert ran.code == 3
    assert "order.deploying" in ran.out  # the event before the drop was shown
    assert "gave up after 3 reconnects" in ran.err and "(overloaded, HTTP 503)" in ran.err
    assert fake.streams() == ["-"] + [str(event_id)] * 3


@pytest.mark.parametrize("stable_seconds", [0.0, 60.0])
def test_streams_that_stay_open_a_while_count_the_reconnects_from_zero(
    autoprovision: Autoprovision,
    fake: FakeStream,
    monkeypatch: pytest.MonkeyPatch,
    stable_seconds: float,
) -> None:
    monkeypatch.setattr(watch, "RECONNECT_PAUSES_SECONDS", (0.01, 0.01))
    monkeypatch.setattr(watch, "STABLE_SECONDS", stable_seconds)
    fake.end_at_once = True  # a quiet account behind a proxy that keeps cutting streams
    ran = autoprovision("watch", "--timeout", "1")
    if stable_seconds:  # positive control: streams that never last are given up on
        assert ran.code == 3 and "gave up after 2 reconnects" in ran.err
        assert len(fake.streams()) == 3
    else:  # each stream "lasted": the watch goes on until its timeout, reconnecting
        assert ran.code == 0, ran.err
        assert len(fake.streams()) > 3


def test_without_an_order_every_event_is_a_line_until_the_timeout(
    autoprovision: Autoprovision, fake: FakeStream
) -> None:
    command = Background(autoprovision, "watch", "--timeout", "1.5")
    connected(fake, "stream -")
    fake.publish("deploying", order_json(ORDER, "deploying"), "create sent.")
    fake.publish("endpoint_disabled", None, "Endpoint whe_1 disabled after 72 h of failures.")
    ran = command.result()
    assert ran.code == 0, ran.err  # watching for a while, as asked, is done
    assert [line.split("  ")[1:3] for line in ran.lines()] == [
        [ORDER, "order.deploying"],
        ["-", "account.endpoint_disabled"],
    ]  # and heartbeats (every 50 ms) printed nothing


def test_until_with_a_timeout_that_passes_is_exit_1(
    autoprovision: Autoprovision, fake: FakeStream
) -> None:
    ran = autoprovision("watch", ORDER, "--until", "running", "--timeout", "0.5")
    assert ran.code == 1
    assert ran.err == (
        f"autoprovision: {ORDER} is still waiting after 0.5 s (--timeout); "
        "it did not get to running\n"
    )


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("ord_01kunknown000000000000000", "--until", "running"), 2,
         "order ord_01kunknown000000000000000 not found (not_found, HTTP 404)"),
        (("--key", "ap_live_wrong-key-0123"), 2, "API key not recognised (unauthorized, HTTP 401)"),
        (("--until", "running"), 2, "needs an ORDER_ID"),
        ((ORDER, "--until", "sideways"), 2, "'sideways' is not one of"),
        (("--timeout", "0"), 2, "must be more than 0 seconds"),
    ],
)  # fmt: skip
def test_bad_input_is_exit_2(
    autoprovision: Autoprovision, fake: FakeStream, args: tuple[str, ...], code: int, message: str
) -> None:
    ran = autoprovision("watch", *args)
    assert ran.code == code and message in ran.err, ran.err
    assert "ap_live_wrong-key-0123" not in ran.err


def test_too_many_open_streams_is_refused_with_exit_1(
    autoprovision: Autoprovision, fake: FakeStream
) -> None:
    fake.refuse = (429, "too_many_streams")
    ran = autoprovision("watch", ORDER, "--until", "running")
    assert ran.code == 1 and "(too_many_streams, HTTP 429)" in ran.err
