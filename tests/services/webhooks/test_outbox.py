"""The outbox: events exist exactly when their change committed; leases make one sender."""

import random
from datetime import timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.clock import utcnow
from app.core.states import WebhookEventType
from app.services import accounts, orders
from app.services.webhooks import endpoints as webhook_endpoints
from app.services.webhooks import outbox
from app.services.webhooks.endpoints import EndpointChanges
from app.services.webhooks.outbox import Outcome
from app.storage.db import create_sessionmaker, session_scope
from app.storage.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent
from app.support.secrets import SecretBox
from tests.factories import place_in_database
from tests.fixtures.settings import SECRET_KEY

STANDARD: list[float] = [0, 5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400]


class TestRetryDelay:
    def test_follows_the_standard_schedule_within_20_percent(self) -> None:
        rng = random.Random(7)
        for attempts_made, base in enumerate(STANDARD):
            delay = outbox.retry_delay(attempts_made, STANDARD, rng=rng)
            assert delay is not None
            assert base * 0.8 <= delay <= base * 1.2

    def test_nothing_is_left_after_the_last_attempt(self) -> None:
        assert outbox.retry_delay(len(STANDARD), STANDARD) is None

    def test_retry_after_is_a_floor_capped_at_a_day(self) -> None:
        assert (outbox.retry_delay(1, STANDARD, retry_after=60) or 0) >= 60
        assert (outbox.retry_delay(2, STANDARD, retry_after=1) or 0) >= 240
        capped = outbox.retry_delay(1, STANDARD, retry_after=10**9)
        assert capped == 86_400


async def _account_with_endpoint(engine: AsyncEngine) -> tuple[str, str]:
    async with session_scope(create_sessionmaker(engine)) as session:
        account, _key = await accounts.create_account(session, name="Outbox")
        endpoint, _secret = await webhook_endpoints.create_endpoint(
            session,
            account_id=account.id,
            url="https://203.0.114.9/hook",
            events=None,
            description=None,
            box=SecretBox([SECRET_KEY]),
            allow_private=False,
        )
        return account.id, endpoint.id


async def _count(engine: AsyncEngine, model: type) -> int:
    async with engine.connect() as connection:
        return int((await connection.execute(select(func.count()).select_from(model))).scalar_one())


async def test_a_change_rolled_back_leaves_no_event(engine: AsyncEngine) -> None:
    account_id, _endpoint_id = await _account_with_endpoint(engine)
    order_id = await place_in_database(engine, account_id)
    with pytest.raises(RuntimeError):
        async with session_scope(create_sessionmaker(engine)) as session:
            await orders.cancel_order(session, account_id=account_id, order_id=order_id)
            raise RuntimeError("the transaction dies before its commit")
    assert await _count(engine, WebhookEvent) == 0
    async with session_scope(create_sessionmaker(engine)) as session:
        await orders.cancel_order(session, account_id=account_id, order_id=order_id)
    assert await _count(engine, WebhookEvent) == 1
    assert await _count(engine, WebhookDelivery) == 1


async def test_a_leased_delivery_goes_to_one_sender_until_its_lease_runs_out(
    engine: AsyncEngine,
) -> None:
    account_id, _endpoint_id = await _account_with_endpoint(engine)
    order_id = await place_in_database(engine, account_id)
    async with session_scope(create_sessionmaker(engine)) as session:
        await orders.cancel_order(session, account_id=account_id, order_id=order_id)
    now = utcnow()

    async def claim(at: timedelta) -> list[outbox.Claimed]:
        async with session_scope(create_sessionmaker(engine)) as session:
            due = await outbox.due(
                session,
                now=now + at,
                busy_endpoints=set(),
                account_load={},
                per_account=4,
                limit=10,
            )
            return await outbox.claim(session, delivery_ids=due, now=now + at, lease_seconds=30)

    (first,) = await claim(timedelta(0))
    assert await claim(timedelta(seconds=1)) == []  # another dispatcher: leased
    async with session_scope(create_sessionmaker(engine)) as session:  # seen due by two at once
        late = await outbox.claim(
            session, delivery_ids=[first.delivery_id], now=now, lease_seconds=30
        )
    assert late == []  # the one that claims second gets nothing
    (again,) = await claim(timedelta(seconds=31))  # the first died: its lease ran out
    assert (again.delivery_id, again.event_id) == (first.delivery_id, first.event_id)
    assert again.lease_token != first.lease_token

    async with session_scope(create_sessionmaker(engine)) as session:  # the dead one's answer
        await outbox.record_attempt(
            session,
            claim=first,
            outcome=Outcome(status_code=200, duration_ms=5),
            now=now,
            schedule=STANDARD,
            disable_after=timedelta(days=3),
        )
    async with engine.connect() as connection:
        status = (await connection.execute(select(WebhookDelivery.status))).scalar_one()
    assert status == "pending"  # only the lease holder moves the delivery
    assert await _count(engine, WebhookAttempt) == 1  # but the attempt is on record


async def test_only_subscribed_enabled_endpoints_get_a_delivery(engine: AsyncEngine) -> None:
    account_id, endpoint_id = await _account_with_endpoint(engine)
    async with session_scope(create_sessionmaker(engine)) as session:
        await webhook_endpoints.update_endpoint(
            session,
            account_id=account_id,
            endpoint_id=endpoint_id,
            request=EndpointChanges(
                sent=frozenset({"events"}), events=[WebhookEventType.ORDER_RUNNING]
            ),
            allow_private=False,
        )
    order_id = await place_in_database(engine, account_id)
    async with session_scope(create_sessionmaker(engine)) as session:
        await orders.cancel_order(session, account_id=account_id, order_id=order_id)
    assert await _count(engine, WebhookEvent) == 0


async def _account_with_endpoints(engine: AsyncEngine, name: str, count: int) -> str:
    async with session_scope(create_sessionmaker(engine)) as session:
        account, _key = await accounts.create_account(session, name=name)
        for n in range(count):
            await webhook_endpoints.create_endpoint(
                session,
                account_id=account.id,
                url=f"https://203.0.114.9/hook/{n}",
                events=None,
                description=None,
                box=SecretBox([SECRET_KEY]),
                allow_private=False,
            )
        return account.id


async def _cancelled_orders(engine: AsyncEngine, account_id: str, count: int) -> None:
    for _ in range(count):
        order_id = await place_in_database(engine, account_id)
        async with session_scope(create_sessionmaker(engine)) as session:
            await orders.cancel_order(session, account_id=account_id, order_id=order_id)


async def test_due_work_is_taken_in_turns_across_accounts(engine: AsyncEngine) -> None:
    busy = await _account_with_endpoints(engine, "Busy", 12)
    await _cancelled_orders(engine, busy, 2)  # 24 deliveries, all older than the quiet one's
    quiet = await _account_with_endpoints(engine, "Quiet", 1)
    await _cancelled_orders(engine, quiet, 1)
    async with engine.connect() as connection:
        rows = (
            await connection.execute(
                select(
                    WebhookDelivery.id,
                    WebhookDelivery.endpoint_id,
                    WebhookDelivery.event_id,
                    WebhookEndpoint.account_id,
                )
                .join(WebhookEndpoint, WebhookEndpoint.id == WebhookDelivery.endpoint_id)
                .order_by(WebhookDelivery.id)
            )
        ).all()
    owner = {row.id: row.account_id for row in rows}
    first_event = rows[0].event_id  # the busy account's older event
    later = utcnow() + timedelta(seconds=1)

    async def due(**load: int) -> list[str]:
        account_load = {busy: load.get("busy", 0), quiet: load.get("quiet", 0)}
        async with session_scope(create_sessionmaker(engine)) as session:
            return await outbox.due(
                session,
                now=later,
                busy_endpoints=set(),
                account_load={k: v for k, v in account_load.items() if v},
                per_account=4,
                limit=5,
            )

    picked = await due()
    assert [owner[d] for d in picked].count(quiet) == 1  # not starved by the older backlog
    assert [owner[d] for d in picked].count(busy) == 4  # the busy account's share, no more
    assert len({row.endpoint_id for row in rows if row.id in picked}) == 5  # one per endpoint
    busy_events = {row.event_id for row in rows if row.id in picked and row.account_id == busy}
    assert busy_events == {first_event}  # each endpoint's oldest first: events go in order
    assert [owner[d] for d in await due(busy=4)] == [quiet]  # its share is taken
    assert await due(busy=4, quiet=4) == []
    assert len(await due(busy=3)) == 2  # one more of the busy account's, and the quiet one
