"""The sender's pieces: signatures during rotation, Retry-After, outcomes."""

from datetime import UTC, datetime, timedelta

from standardwebhooks.webhooks import Webhook

from app.services.webhooks.outbox import Outcome
from app.support.secrets import new_signing_secret
from app.webhooks.sender import WebhookSender, retry_after_seconds, signature_header
from tests.webhooks.receiver import running_receiver


def test_during_a_rotation_either_secret_verifies() -> None:
    old, new = new_signing_secret(), new_signing_secret()
    now = datetime.now(UTC)
    header = signature_header("msg_1", now, '{"a":1}', [new, old])
    headers = {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": header,
    }
    assert header.count("v1,") == 2
    for secret in (old, new):
        assert Webhook(secret).verify('{"a":1}', headers) == {"a": 1}


def test_retry_after_in_seconds_or_as_a_date() -> None:
    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    assert retry_after_seconds("120", now=now) == 120
    later = (now + timedelta(minutes=5)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert retry_after_seconds(later, now=now) == 300
    assert retry_after_seconds("soon", now=now) is None
    assert retry_after_seconds(None, now=now) is None


def test_only_2xx_is_a_success() -> None:
    assert Outcome(status_code=204, duration_ms=3).succeeded
    for code in (301, 302, 400, 410, 500):
        assert not Outcome(status_code=code, duration_ms=3).succeeded
    assert not Outcome(status_code=None, duration_ms=3, error="timed out").succeeded


async def test_delivery_refuses_the_ipv4_compatible_form_of_a_receiver_it_reaches() -> None:
    sender = WebhookSender(timeout_seconds=2, allow_private=True)  # loopback allowed, as in demo
    outcomes = {}
    try:
        with running_receiver() as receiver:
            port = receiver.url.rsplit(":", 1)[1]
            for host in ("[::127.0.0.1]", "127.0.0.1.", "127.0.0.1"):
                outcomes[host] = await sender.send(
                    f"http://{host}:{port}/hook",
                    msg_id=f"msg_{host}",
                    payload="{}",
                    secrets=[new_signing_secret()],
                )
            arrived = [r.headers["webhook-id"] for r in receiver.on("/hook")]
    finally:
        await sender.aclose()
    refused = outcomes["[::127.0.0.1]"]
    assert refused.status_code is None
    assert "reserved (IPv4-compatible)" in (refused.error or "")
    assert outcomes["127.0.0.1."].succeeded and outcomes["127.0.0.1"].succeeded
    assert arrived == ["msg_127.0.0.1.", "msg_127.0.0.1"]


def test_retry_after_takes_only_ascii_digits_of_a_sane_length_or_a_date() -> None:
    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    assert retry_after_seconds("\u00b2", now=now) is None  # superscript two: isdigit() is true
    assert retry_after_seconds("\uff11\uff12", now=now) is None  # fullwidth "12"
    assert retry_after_seconds("9" * 4400, now=now) is None  # past int()'s digit limit
    assert retry_after_seconds("1\u00b2", now=now) is None
    assert retry_after_seconds(" 30 ", now=now) == 30  # control: plain digits still count
    later = (now + timedelta(seconds=90)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert retry_after_seconds(later, now=now) == 90
    assert retry_after_seconds("Sun, 29 Nov 2026 12:00:00 \u00b2", now=now) is None


async def test_a_port_of_this_service_or_a_simulator_path_is_refused_when_sending() -> None:
    with running_receiver() as receiver:
        port = int(receiver.url.rsplit(":", 1)[1])
        guarded = WebhookSender(
            timeout_seconds=2, allow_private=True, refused_ports=frozenset({port})
        )
        open_ = WebhookSender(timeout_seconds=2, allow_private=True)
        try:
            secrets = [new_signing_secret()]
            own_port = await guarded.send(
                f"{receiver.url}/hook", msg_id="msg_1", payload="{}", secrets=secrets
            )
            sim_path = await open_.send(
                f"{receiver.url}/%5Fsim/reset", msg_id="msg_2", payload="{}", secrets=secrets
            )
            fine = await open_.send(  # control: another port and path go out
                f"{receiver.url}/hook", msg_id="msg_3", payload="{}", secrets=secrets
            )
        finally:
            await guarded.aclose()
            await open_.aclose()
        arrived = [r.headers["webhook-id"] for r in receiver.received]
    assert own_port.status_code is None and "this service's" in (own_port.error or "")
    assert sim_path.status_code is None and "/_sim" in (sim_path.error or "")
    assert fine.succeeded
    assert arrived == ["msg_3"]
