"""`POST /v1/machines/report`: a machine reports its stage with its attempt's token, and its
order shows it; anything else is refused with a clear JSON error, on both databases."""

import logging
from decimal import Decimal
from typing import Any

import httpx
import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.catalogue import Provider
from app.core.market import Offer
from app.core.states import AttemptStatus
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import Attempt
from tests.factories import AccountHandle, claim, create_account, place_order
from tests.waiting import eventually

REPORT = "/v1/machines/report"
VERDA_H100 = Offer(Provider("verda"), "FIN-01", "1H100.80S.22V", "H100", 1, Decimal("2.19"))
SCRIPT = "#!/bin/bash\necho serving\n"


async def _deploying(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> tuple[AccountHandle, dict[str, Any], str]:
    """An account's order with a start-up script, claimed for Verda's H100: the account, the
    order as placed, and the token its machine would report with."""
    handle = await create_account(client, credit="50")
    order = await place_order(
        client,
        handle,
        gpu_model="H100",
        gpu_count=1,
        providers=["verda"],
        max_price_per_hour="3.00",
        startup_script=SCRIPT,
    )
    intent = await claim(engine, order["id"], VERDA_H100)
    assert intent.report_token is not None
    return handle, order, intent.report_token


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_report_shows_on_the_order_and_its_timeline_and_the_token_nowhere(
    client: httpx.AsyncClient, engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    handle, order, token = await _deploying(client, engine)
    answer = await client.post(
        REPORT,
        json={"stage": "downloading", "bytes_done": 5, "bytes_total": 10, "detail": "weights"},
        headers=_as(token),
    )
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"stage": "downloading"}
    shown = (await client.get(f"/v1/orders/{order['id']}", headers=handle.headers)).json()
    deployment = shown["deployment"]
    assert (deployment["stage"], deployment["stage_detail"]) == ("downloading", "weights")
    assert deployment["progress"] == {
        "bytes_done": 5,
        "bytes_total": 10,
        "rate": None,  # one report: no rate yet
        "eta_seconds": None,
    }
    timeline = await client.get(f"/v1/orders/{order['id']}/events", headers=handle.headers)
    assert "The machine reports: downloading ('weights')." in timeline.text
    for said in (answer.text, str(shown), timeline.text, caplog.text):
        assert token not in said


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({}, "unauthorized"),
        ({"Authorization": "Bearer apm_not-a-token-of-any-attempt"}, "invalid_report_token"),
    ],
)
async def test_a_report_without_its_machine_s_token_is_refused(
    client: httpx.AsyncClient, engine: AsyncEngine, headers: dict[str, str], code: str
) -> None:
    _, _, token = await _deploying(client, engine)
    answer = await client.post(REPORT, json={"stage": "booted"}, headers=headers)
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == code
    taken = await client.post(REPORT, json={"stage": "booted"}, headers=_as(token))
    assert taken.status_code == 200  # control: the machine's own token is taken


async def test_an_account_s_api_key_is_not_a_machine_s_token(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    handle, _, _ = await _deploying(client, engine)
    answer = await client.post(REPORT, json={"stage": "booted"}, headers=handle.headers)
    assert (answer.status_code, answer.json()["error"]["code"]) == (401, "invalid_report_token")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"stage": "finished"}, "stage"),
        ({}, "stage"),
        ({"stage": "booted", "cause": "no_gpu"}, "cause"),
        ({"stage": "failed", "cause": "gremlins"}, "cause"),
        ({"stage": "downloading", "bytes_done": 11, "bytes_total": 10}, "bytes_done"),
        ({"stage": "downloading", "bytes_done": -1}, "bytes_done"),
        ({"stage": "downloading", "bytes_done": "5"}, "bytes_done"),
        ({"stage": "booted", "detail": "x" * 501}, "detail"),
        ({"stage": "healthy", "time_to_first_token_seconds": 0.4}, "time_to_first_token_seconds"),
        ({"stage": "ready", "time_to_first_token_seconds": -1}, "time_to_first_token_seconds"),
        ({"stage": "booted", "token": "<script>"}, "token"),
    ],
)
async def test_a_bad_report_is_a_422_naming_the_field_and_changes_nothing(
    client: httpx.AsyncClient, engine: AsyncEngine, body: dict[str, Any], field: str
) -> None:
    handle, order, token = await _deploying(client, engine)
    answer = await client.post(REPORT, json=body, headers=_as(token))
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert field in {d["field"] for d in error["details"]}
    assert "<script>" not in answer.text and "gremlins" not in answer.text  # not echoed back
    shown = (await client.get(f"/v1/orders/{order['id']}", headers=handle.headers)).json()
    assert shown["deployment"]["stage"] is None


async def test_a_failure_report_says_its_cause_and_one_without_a_cause_is_other(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    handle, order, token = await _deploying(client, engine)
    answer = await client.post(REPORT, json={"stage": "failed"}, headers=_as(token))
    assert answer.status_code == 200, answer.text
    shown = (await client.get(f"/v1/orders/{order['id']}", headers=handle.headers)).json()
    assert shown["deployment"]["stage_detail"] == "other"


async def test_a_machine_being_deleted_may_report_no_more(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    _, order, token = await _deploying(client, engine)
    assert (await client.post(REPORT, json={"stage": "booted"}, headers=_as(token))).is_success
    async with session_scope(create_sessionmaker(engine)) as session:
        await session.execute(
            update(Attempt)
            .where(Attempt.order_id == order["id"])
            .values(status=AttemptStatus.TERMINATING)
        )
    answer = await client.post(REPORT, json={"stage": "ready"}, headers=_as(token))
    assert (answer.status_code, answer.json()["error"]["code"]) == (409, "attempt_ended")


async def test_stages_reach_the_event_stream_and_a_subscribed_webhook(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    handle, order, token = await _deploying(client, engine)
    endpoint = await client.post(
        "/v1/webhook-endpoints",
        json={"url": "http://127.0.0.1:9/hook", "events": ["order.ready"]},
        headers=handle.headers,
    )
    assert endpoint.status_code == 201, endpoint.text
    for body in ({"stage": "booted"}, {"stage": "ready", "time_to_first_token_seconds": 0.25}):
        answer = await client.post(REPORT, json=body, headers=_as(token))
        assert answer.status_code == 200, answer.text

    async def published() -> list[dict[str, Any]] | None:
        """The order's events once the stream has published both stages."""
        events = (await client.get("/v1/events", headers=handle.headers)).json()["data"]
        mine = [e for e in events if e["order_id"] == order["id"]]
        return mine if any(e["type"] == "order.ready" for e in mine) else None

    mine = await eventually(published, what="order.ready on the event stream")
    assert [e["type"] for e in mine if e["type"] in {"order.progress", "order.ready"}] == [
        "order.progress",
        "order.ready",
    ]
    ready = next(e for e in mine if e["type"] == "order.ready")
    assert ready["data"]["deployment"]["stage"] == "ready"
    assert ready["data"]["deployment"]["ready_at"] is not None
    assert ready["data"]["deployment"]["time_to_first_token_seconds"] == 0.25
    deliveries = await client.get(
        f"/v1/webhook-endpoints/{endpoint.json()['id']}/deliveries", headers=handle.headers
    )
    # Subscribed to order.ready only: the booted stage's order.progress is not delivered.
    assert [d["event_type"] for d in deliveries.json()["data"]] == ["order.ready"]
