"""Events keep an order without its SSH public key: its fingerprint instead, so 30 days of
events (webhooks and the event stream) hold no copy of a key of up to 4 KB."""

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.api.order_schemas import MAX_SSH_KEY_LENGTH
from app.support.security import ssh_key_fingerprint
from tests.factories import create_account
from tests.waiting import eventually
from tests.watcher.orders import h100, place
from tests.webhooks.endpoints import add_endpoint, arrived
from tests.webhooks.receiver import Receiver

needs_ssh_keygen = pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="no ssh-keygen")


def _big_key(tmp_path: Path) -> tuple[str, str]:
    """An ed25519 public key padded with a comment to the longest an order takes, and its
    fingerprint as `ssh-keygen -lf` prints it."""
    private = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(private)], check=True)
    kind, blob, *_ = (tmp_path / "key.pub").read_text().split()
    line = f"{kind} {blob} "
    line += "k" * (MAX_SSH_KEY_LENGTH - len(line))
    (tmp_path / "big.pub").write_text(line + "\n")
    listed = subprocess.run(
        ["ssh-keygen", "-lf", str(tmp_path / "big.pub")], check=True, capture_output=True, text=True
    )
    return line, listed.stdout.split()[1]


@needs_ssh_keygen
def test_the_fingerprint_is_ssh_keygens(tmp_path: Path) -> None:
    key, expected = _big_key(tmp_path)
    assert expected.startswith("SHA256:") and not expected.endswith("=")
    assert ssh_key_fingerprint(key) == expected
    assert ssh_key_fingerprint(None) is None


@needs_ssh_keygen
async def test_webhooks_and_the_event_stream_carry_the_fingerprint_not_the_key(
    client: httpx.AsyncClient, receiver: Receiver, tmp_path: Path
) -> None:
    key, fingerprint = _big_key(tmp_path)
    blob = key.split()[1]
    account = await create_account(client)
    endpoint = await add_endpoint(client, account, f"{receiver.url}/hook")
    order_id = await place(client, account, h100(providers=["quantacloud"], ssh_public_key=key))
    cancelled = await client.post(f"/v1/orders/{order_id}/cancel", headers=account.headers)
    assert cancelled.status_code == 200, cancelled.text

    (request,) = await arrived(receiver, "/hook", 1)
    assert blob.encode() not in request.body and b"kkkkkkkk" not in request.body
    data = request.verify(endpoint["secret"])["data"]
    assert "ssh_public_key" not in data
    assert data["ssh_key_fingerprint"] == fingerprint
    assert len(request.body) < MAX_SSH_KEY_LENGTH  # was over it with the key inside

    async def published() -> list[dict[str, Any]] | None:
        page = await client.get("/v1/events", headers=account.headers)
        events: list[dict[str, Any]] = page.json()["data"]
        return events if any(e["type"] == "order.cancelled" for e in events) else None

    events = await eventually(published)
    page = await client.get("/v1/events", headers=account.headers)
    assert blob not in page.text and "kkkkkkkk" not in page.text
    for event in events:
        assert "ssh_public_key" not in event["data"]
        assert event["data"]["ssh_key_fingerprint"] == fingerprint

    # The order itself is its owner's own data: it still shows the key it was given.
    shown = await client.get(f"/v1/orders/{order_id}", headers=account.headers)
    assert shown.json()["ssh_public_key"] == key
    assert "ssh_key_fingerprint" not in shown.json()


async def test_an_order_without_a_key_has_no_fingerprint(
    client: httpx.AsyncClient, receiver: Receiver
) -> None:
    account = await create_account(client)
    await add_endpoint(client, account, f"{receiver.url}/hook")
    order_id = await place(client, account, h100(providers=["quantacloud"]))
    await client.post(f"/v1/orders/{order_id}/cancel", headers=account.headers)
    (request,) = await arrived(receiver, "/hook", 1)
    data = json.loads(request.body)["data"]
    assert data["ssh_key_fingerprint"] is None and "ssh_public_key" not in data
