"""An order's start-up script through the API: taken in, sealed at rest, never shown again (only
its SHA-256 and size), refused with a 422 naming it when it cannot be run, both databases."""

import hashlib
import json
import logging
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.services import startup_scripts
from app.storage.models import Order, OrderEvent, WebhookEvent
from app.support.secrets import SecretBox
from tests.factories import AccountHandle, create_account, order_body
from tests.fixtures.settings import SECRET_KEY
from tests.waiting import eventually

# A token-looking line, so that any place it leaks to is found by a plain search.
SCRIPT = "#!/bin/bash\nexport HF_TOKEN=hf_s3cr3t_t0k3n_4a7c\necho ready > /tmp/ready\n"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def placed(client: httpx.AsyncClient, account: AccountHandle, **body: Any) -> Any:
    answer = await client.post("/v1/orders", json=order_body(**body), headers=account.headers)
    assert answer.status_code == 201, answer.text
    return answer.json()


async def refused(client: httpx.AsyncClient, account: AccountHandle, **body: Any) -> str:
    """The message of the 422 that names `startup_script`."""
    answer = await client.post("/v1/orders", json=order_body(**body), headers=account.headers)
    assert answer.status_code == 422, answer.text
    details = answer.json()["error"]["details"]
    assert [d["field"] for d in details] == ["startup_script"], details
    message: str = details[0]["message"]
    return message


async def test_a_script_is_taken_and_shown_only_as_its_hash_and_size(
    client: httpx.AsyncClient, engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    account = await create_account(client)
    order = await placed(client, account, startup_script=SCRIPT)
    size = len(SCRIPT.encode())
    assert (order["startup_script_sha256"], order["startup_script_bytes"]) == (sha256(SCRIPT), size)
    assert "startup_script" not in order
    shown = [
        await client.get(f"/v1/orders/{order['id']}", headers=account.headers),
        await client.get("/v1/orders", headers=account.headers),
        await client.get(f"/v1/orders/{order['id']}/events", headers=account.headers),
    ]
    for answer in shown:
        assert answer.status_code == 200
        assert "hf_s3cr3t" not in answer.text
    assert shown[0].json()["startup_script_sha256"] == sha256(SCRIPT)

    async def published() -> list[Any] | None:
        page = (await client.get("/v1/events", headers=account.headers)).json()["data"]
        return page or None

    (event,) = await eventually(published)  # the stream's copy, rendered from the order
    assert event["data"]["startup_script_bytes"] == size
    assert "hf_s3cr3t" not in json.dumps(event)
    assert not [r for r in caplog.records if "hf_s3cr3t" in r.getMessage()]

    async with engine.connect() as connection:
        row = (await connection.execute(select(Order).where(Order.id == order["id"]))).one()
        lines = (await connection.execute(select(OrderEvent.message))).scalars().all()
        payloads = (await connection.execute(select(WebhookEvent.payload))).scalars().all()
    assert "hf_s3cr3t" not in row.startup_script  # sealed at rest, for this order only
    assert SecretBox([SECRET_KEY]).open(order["id"], row.startup_script) == SCRIPT
    assert not [text for text in [*lines, *payloads] if "hf_s3cr3t" in text]


async def test_an_order_without_a_script_shows_none(client: httpx.AsyncClient) -> None:
    account = await create_account(client)
    order = await placed(client, account)
    assert (order["startup_script_sha256"], order["startup_script_bytes"]) == (None, None)


async def test_a_script_of_exactly_the_limit_is_taken_and_one_byte_more_is_not(
    client: httpx.AsyncClient,
) -> None:
    account = await create_account(client)
    limit = startup_scripts.MAX_BYTES
    at_limit = "#" * (limit - 2) + "é"  # the limit counts UTF-8 bytes, not characters
    order = await placed(client, account, startup_script=at_limit)
    assert order["startup_script_bytes"] == limit
    message = await refused(client, account, startup_script=at_limit + "x")
    assert message == f"must be at most {limit} bytes as UTF-8 ({limit + 1} given)"
    many_bytes = "é" * (limit // 2 + 1)  # fewer characters than the limit, more bytes
    assert "at most" in await refused(client, account, startup_script=many_bytes)


@pytest.mark.parametrize(
    ("script", "said"),
    [
        (123, "string"),
        (["echo", "hi"], "string"),
        (True, "string"),
        ("echo a\x00b", "NUL"),
        ("", "empty"),
        ("  \n\t", "empty"),
    ],
    ids=["number", "list", "boolean", "nul", "empty", "blank"],
)
async def test_a_script_that_cannot_be_run_is_a_422_naming_it(
    client: httpx.AsyncClient, script: Any, said: str
) -> None:
    account = await create_account(client)
    assert said in await refused(client, account, startup_script=script)
    assert (await client.get("/v1/orders", headers=account.headers)).json()["data"] == []


async def test_a_lone_surrogate_escape_is_a_422_not_a_crash(client: httpx.AsyncClient) -> None:
    account = await create_account(client)
    body = json.dumps(order_body(startup_script="PLACEHOLDER")).replace("PLACEHOLDER", "\\ud800")
    answer = await client.post(
        "/v1/orders",
        content=body.encode(),
        headers={**account.headers, "Content-Type": "application/json"},
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["details"][0]["field"] == "startup_script"


async def test_bytes_that_are_not_utf8_are_a_clear_4xx(client: httpx.AsyncClient) -> None:
    account = await create_account(client)
    body = json.dumps(order_body(startup_script="PLACEHOLDER")).encode()
    answer = await client.post(
        "/v1/orders",
        content=body.replace(b"PLACEHOLDER", b"echo \xff\xfe"),
        headers={**account.headers, "Content-Type": "application/json"},
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "invalid_json"


async def test_a_script_only_a_provider_without_scripts_could_run_is_refused(
    client: httpx.AsyncClient,
) -> None:
    account = await create_account(client)
    message = await refused(client, account, providers=["quantacloud"], startup_script=SCRIPT)
    assert message == (
        "QuantaCloud cannot run a start-up script: accept a provider that can "
        "(Verda or Hyperstack), or leave the script out"
    )
    # Positive control: the same order without the script is placed.
    await placed(client, account, providers=["quantacloud"])


async def test_an_order_that_also_accepts_such_a_provider_says_once_it_never_deploys_there(
    client: httpx.AsyncClient,
) -> None:
    account = await create_account(client)
    order = await placed(client, account, providers=["verda", "quantacloud"], startup_script=SCRIPT)
    assert order["providers"] == ["verda", "quantacloud"]
    answer = await client.get(f"/v1/orders/{order['id']}/events", headers=account.headers)
    timeline = [(e["kind"], e["message"]) for e in answer.json()]
    assert timeline[1:] == [
        (
            "providers_disabled",
            "QuantaCloud: cannot run a start-up script; this order deploys only on Verda.",
        )
    ]
    plain = await placed(client, account, providers=["verda", "quantacloud"])
    answer = await client.get(f"/v1/orders/{plain['id']}/events", headers=account.headers)
    assert [e["kind"] for e in answer.json()] == ["placed"]  # control: no script, no line
