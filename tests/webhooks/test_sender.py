"""The sender's pieces: signatures during rotation, Retry-After, outcomes."""

from datetime import UTC, datetime, timedelta

from standardwebhooks.webhooks import Webhook

from app.webhooks.secrets import new_signing_secret
from app.webhooks.sender import Outcome, retry_after_seconds, signature_header


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
