"""The event stream and the page of events: what arrives, resuming, caps and bad input."""

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.order_schemas import OrderCreate
from app.api.routes.events import _events
from app.core.clock import utcnow
from app.main import create_app
from app.services import placing, published_events
from app.settings import Settings
from app.storage.db import (
    create_engine,
    create_read_sessionmaker,
    create_sessionmaker,
    session_scope,
)
from app.stream.hub import Hub
from app.stream.publisher import Publisher
from tests.factories import AccountHandle, account_in_database, order_body, place_in_database
from tests.servers import serve_in_thread
from tests.streams import streaming
from tests.waiting import eventually

ADMIN = {"Authorization": "Bearer test-admin-key-0123456789"}


@contextlib.contextmanager
def running(settings: Settings, **overrides: Any) -> Iterator[str]:
    """The app on a real socket (streams need one), with its lifespan; yields its base URL."""
    with serve_in_thread(create_app(settings.model_copy(update=overrides)), lifespan="on") as url:
        yield url


@pytest.fixture
def base_url(settings: Settings) -> Iterator[str]:
    """One running service on this test's database."""
    with running(settings, stream_heartbeat_seconds=0.2) as url:
        yield url


async def new_account(base_url: str, name: str = "Ada") -> AccountHandle:
    """An account made through the admin API."""
    async with httpx.AsyncClient(base_url=base_url) as client:
        response = await client.post("/v1/accounts", json={"name": name}, headers=ADMIN)
    assert response.status_code == 201, response.text
    return AccountHandle(response.json()["id"], response.json()["api_key"])


async def place(base_url: str, account: AccountHandle, **overrides: Any) -> str:
    """Place an order; its id."""
    async with httpx.AsyncClient(base_url=base_url) as client:
        response = await client.post(
            "/v1/orders", json=order_body(**overrides), headers=account.headers
        )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def cancel(base_url: str, account: AccountHandle, order_id: str) -> None:
    """Cancel an order."""
    async with httpx.AsyncClient(base_url=base_url) as client:
        response = await client.post(f"/v1/orders/{order_id}/cancel", headers=account.headers)
    assert response.status_code == 200, response.text


def types_of(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(type, order id) of each event."""
    return [(event["type"], event["order_id"]) for event in events]


class TestStream:
    async def test_each_event_of_the_account_arrives_as_it_happens_with_the_order(
        self, base_url: str
    ) -> None:
        ada, bob = await new_account(base_url), await new_account(base_url, "Bob")
        async with (
            streaming(base_url, ada.api_key) as ada_sees,
            streaming(base_url, bob.api_key) as bob_sees,
        ):
            order = await place(base_url, ada, name="run 1")
            await ada_sees.until(lambda events: len(events) == 1)
            await cancel(base_url, ada, order)
            bobs = await place(base_url, bob)
            events = await ada_sees.until(lambda events: len(events) == 2)
            await bob_sees.until(lambda events: len(events) == 1)
        assert types_of(events) == [("order.placed", order), ("order.cancelled", order)]
        placed, cancelled = events
        assert placed["data"]["name"] == "run 1" and placed["message"].startswith("Order placed")
        assert cancelled["data"]["status"] == "cancelled"
        assert cancelled["id"] > placed["id"]
        # The same setup shows Bob his own order, and only his.
        assert types_of(bob_sees.events) == [("order.placed", bobs)]

    async def test_a_top_up_arrives_as_an_account_event(self, base_url: str) -> None:
        ada = await new_account(base_url)
        async with streaming(base_url, ada.api_key) as seen:
            async with httpx.AsyncClient(base_url=base_url) as client:
                topped = await client.post(
                    f"/v1/accounts/{ada.id}/credits", json={"amount": "5"}, headers=ADMIN
                )
            assert topped.status_code == 201
            (event,) = await seen.until(lambda events: len(events) == 1)
        assert event["type"] == "account.credited" and event["order_id"] is None
        assert event["message"] == "$5.00 added to the balance." and event["data"] is None

    async def test_a_new_stream_starts_after_the_newest_event(self, base_url: str) -> None:
        ada = await new_account(base_url)
        before = await place(base_url, ada)
        async with httpx.AsyncClient(base_url=base_url) as client:

            async def published() -> list[Any]:
                page = await client.get("/v1/events", headers=ada.headers)
                return list(page.json()["data"])

            await eventually(published)
        async with streaming(base_url, ada.api_key) as seen:
            after = await place(base_url, ada)
            events = await seen.until(lambda events: len(events) >= 1)
        assert types_of(events) == [("order.placed", after)]
        assert before != after

    async def test_heartbeat_comments_keep_an_idle_stream_alive(self, base_url: str) -> None:
        ada = await new_account(base_url)
        lines: list[str] = []
        async with (
            httpx.AsyncClient(base_url=base_url, timeout=10) as client,
            client.stream("GET", "/v1/events/stream", headers=ada.headers) as response,
        ):
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                lines.append(line)
                if sum(line.startswith(":") for line in lines) >= 3:
                    break
        first, *pings = [line for line in lines if line.startswith(":")]
        assert first == ": heartbeat 0.2"  # how often to expect one, said first
        assert len(pings) == 2 and all(ping.startswith(": ping") for ping in pings)


class TestResume:
    async def test_last_event_id_resumes_without_a_gap_or_a_repeat_across_a_restart(
        self, settings: Settings
    ) -> None:
        with running(settings) as first:
            ada = await new_account(first)
            async with streaming(first, ada.api_key) as seen:
                orders = [await place(first, ada) for _ in range(3)]
                events = await seen.until(lambda events: len(events) == 3)
            resume_after = events[1]["id"]  # as if the third never reached the client
            later = await place(first, ada)
        with running(settings) as second:  # a new process on the same database
            last = await place(second, ada)
            async with streaming(second, ada.api_key, last_event_id=resume_after) as resumed:
                got = await resumed.until(lambda events: len(events) >= 3)
        assert types_of(got) == [
            ("order.placed", orders[2]),
            ("order.placed", later),
            ("order.placed", last),
        ]
        assert got[0] == events[2]  # the same event, as the first stream sent it

    async def test_a_last_event_id_whose_events_were_all_pruned_still_resumes(
        self, settings: Settings, engine: AsyncEngine
    ) -> None:
        """A quiet service prunes every event after 30 days; a client holding an id from
        before must resume, not be told its id is from the future."""
        with running(settings) as url:
            ada = await new_account(url)
            async with streaming(url, ada.api_key) as seen:
                await place(url, ada)
                (old,) = await seen.until(lambda events: len(events) == 1)
            async with session_scope(create_sessionmaker(engine)) as session:
                assert await published_events.prune(session, older_than=utcnow()) == 1
            async with streaming(url, ada.api_key, last_event_id=old["id"]) as resumed:
                assert resumed.status_code == 200
                order_id = await place(url, ada)
                got = await resumed.until(lambda events: len(events) == 1)
        assert types_of(got) == [("order.placed", order_id)]
        assert got[0]["id"] > old["id"]

    async def test_events_written_by_another_replica_arrive(
        self, settings: Settings, backend: str
    ) -> None:
        if backend != "postgres":
            pytest.skip("replicas share a PostgreSQL database (an SQLite file has one process)")
        with running(settings) as one, running(settings) as two:
            ada = await new_account(one)
            async with streaming(two, ada.api_key) as seen_on_two:
                first = await place(one, ada)
                events = await seen_on_two.until(lambda events: len(events) == 1)
            second = await place(one, ada)
            async with streaming(one, ada.api_key, last_event_id=events[0]["id"]) as resumed_on_one:
                third = await place(two, ada)
                got = await resumed_on_one.until(lambda events: len(events) == 2)
        assert types_of(events) == [("order.placed", first)]
        assert types_of(got) == [("order.placed", second), ("order.placed", third)]


class TestLimits:
    async def test_past_the_cap_a_stream_is_refused_with_429_until_one_closes(
        self, settings: Settings
    ) -> None:
        with running(settings, stream_max_per_account=2) as url:
            ada, bob = await new_account(url), await new_account(url, "Bob")
            async with streaming(url, ada.api_key) as one:
                async with streaming(url, ada.api_key) as two:
                    assert one.status_code == two.status_code == 200
                    async with httpx.AsyncClient(base_url=url) as client:
                        refused = await client.get("/v1/events/stream", headers=ada.headers)
                    async with streaming(url, bob.api_key) as bobs:
                        assert bobs.status_code == 200  # the cap is per account
                assert refused.status_code == 429
                assert refused.json()["error"]["code"] == "too_many_streams"

                async def reopened() -> bool:
                    async with streaming(url, ada.api_key) as three:
                        return three.status_code == 200

                assert await eventually(reopened)

    # 4,301 digits and more are past Python's int() limit (it was a 500), leading zeros too.
    @pytest.mark.parametrize("value", ["abc", "-1", "1.5", "1e3", "9" * 5000, "0" * 5000 + "1"])
    async def test_a_last_event_id_that_is_not_an_id_is_a_400(
        self, base_url: str, value: str
    ) -> None:
        ada = await new_account(base_url)
        async with httpx.AsyncClient(base_url=base_url) as client:
            response = await client.get(
                "/v1/events/stream", headers={**ada.headers, "Last-Event-ID": value}
            )
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "bad_last_event_id"

    async def test_a_last_event_id_newer_than_any_event_is_a_400(self, base_url: str) -> None:
        ada = await new_account(base_url)
        async with httpx.AsyncClient(base_url=base_url) as client:
            response = await client.get(
                "/v1/events/stream", headers={**ada.headers, "Last-Event-ID": "999999"}
            )
        assert response.status_code == 400
        assert "newer than the newest event" in response.json()["error"]["message"]

    async def test_the_400_for_a_future_id_tells_the_accounts_newest_not_the_platforms(
        self, base_url: str
    ) -> None:
        ada, bob = await new_account(base_url), await new_account(base_url, "Bob")
        for _ in range(3):
            await place(base_url, ada)
        async with httpx.AsyncClient(base_url=base_url) as client:

            async def bobs_first() -> list[Any]:
                return list((await client.get("/v1/events", headers=bob.headers)).json()["data"])

            await place(base_url, bob)
            (bobs,) = await eventually(bobs_first)
            headers = {**bob.headers, "Last-Event-ID": "2"}
            # A stream, not a get: were the id taken, the answer would never end.
            async with client.stream("GET", "/v1/events/stream", headers=headers) as response:
                status, body = response.status_code, await anext(response.aiter_bytes())
        assert bobs["id"] == 1  # Ada's three events before it are not counted in Bob's ids
        assert status == 400  # positive control: past Bob's newest is refused
        assert b"Last-Event-ID 2 is newer than the newest event (1)" in body

    async def test_a_stream_needs_an_account_key(self, base_url: str) -> None:
        async with httpx.AsyncClient(base_url=base_url) as client:
            anonymous = await client.get("/v1/events/stream")
            admin = await client.get("/v1/events/stream", headers=ADMIN)
        assert anonymous.status_code == 401 and admin.status_code == 403


async def _place_many(database_url: str, account_id: str, count: int) -> None:
    """Place `count` orders in one transaction (the service layer, not the API: fast)."""
    engine = create_engine(database_url)
    request = OrderCreate(**order_body()).new_order()
    try:
        async with session_scope(create_sessionmaker(engine)) as session:
            for _ in range(count):
                await placing.place_order(
                    session,
                    account_id=account_id,
                    request=request,
                    enabled={"verda", "hyperstack"},
                    max_waiting=count,
                )
    finally:
        await engine.dispose()


@pytest.mark.slow  # waits for the send timeout on the real clock
class TestSlowClient:
    async def test_a_client_that_stops_reading_is_disconnected_while_a_reading_one_stays(
        self, settings: Settings
    ) -> None:
        app = create_app(settings.model_copy(update={"stream_send_timeout_seconds": 0.5}))
        with serve_in_thread(app, lifespan="on") as url:
            ada = await new_account(url)
            host, port = url.removeprefix("http://").split(":")
            stalled = socket.socket()
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.connect((host, int(port)))
            stalled.sendall(
                f"GET /v1/events/stream HTTP/1.1\r\nHost: {host}\r\n"
                f"Authorization: Bearer {ada.api_key}\r\n\r\n".encode()
            )
            try:
                async with streaming(url, ada.api_key) as reader:

                    async def both_open() -> bool:
                        return bool(app.state.hub.open_streams(ada.id) == 2)

                    await eventually(both_open)
                    # Far more than the socket buffers hold: the stalled client's sends block.
                    await _place_many(settings.database_url, ada.id, 8000)
                    await reader.until(lambda events: len(events) == 8000, seconds=120)

                    async def stalled_dropped() -> bool:
                        return bool(app.state.hub.open_streams(ada.id) == 1)

                    await eventually(stalled_dropped, seconds=30)
                    assert not reader.ended.is_set()  # the one that reads stays connected
            finally:
                stalled.close()


class _CountingSemaphore(asyncio.Semaphore):
    """A semaphore that counts who has asked for it (granted or still waiting)."""

    asked = 0

    async def acquire(self) -> Literal[True]:
        self.asked += 1
        return await super().acquire()


class _GatedReads:
    """A read sessionmaker whose sessions stay open until the test lets them go."""

    def __init__(self, sessionmaker: Any) -> None:
        self.sessionmaker = sessionmaker
        self.inside = 0
        self.most_inside = 0
        self.go = asyncio.Event()

    @contextlib.asynccontextmanager
    async def __call__(self) -> AsyncIterator[Any]:
        self.inside += 1
        self.most_inside = max(self.most_inside, self.inside)
        try:
            await self.go.wait()
            async with self.sessionmaker() as session:
                yield session
        finally:
            self.inside -= 1


class TestReadBound:
    @pytest.mark.parametrize(("reads_at_once", "expected_most"), [(1, 1), (5, 5)])
    async def test_however_many_streams_wake_they_read_through_the_bound_and_all_get_it(
        self, engine: AsyncEngine, reads_at_once: int, expected_most: int
    ) -> None:
        account_id = await account_in_database(engine)
        await place_in_database(engine, account_id)
        hub = Hub(per_account=5)
        hub.reading = bound = _CountingSemaphore(reads_at_once)
        reads = _GatedReads(create_read_sessionmaker(engine))
        publisher = Publisher(create_sessionmaker(engine), create_read_sessionmaker(engine), hub)
        await publisher.run_once()
        streams = [_events(reads, hub, hub.listen(account_id), 0, heartbeat=15) for _ in range(5)]
        for stream in streams:
            assert (await anext(stream)).comment == "heartbeat 15"
        firsts = [asyncio.ensure_future(anext(stream)) for stream in streams]

        async def every_stream_asked_and_the_allowed_ones_read() -> bool:
            return bound.asked == 5 and reads.inside == expected_most

        await eventually(every_stream_asked_and_the_allowed_ones_read)
        assert reads.most_inside == expected_most  # 1 with the bound at 1; 5 (control) at 5
        reads.go.set()
        got = await asyncio.gather(*firsts)
        assert {event.event for event in got} == {"order.placed"}
        for stream in streams:
            await stream.aclose()
        assert hub.open_streams(account_id) == 0


class TestPage:
    async def test_pages_follow_next_cursor_oldest_first_and_show_only_the_account(
        self, base_url: str
    ) -> None:
        ada, bob = await new_account(base_url), await new_account(base_url, "Bob")
        await place(base_url, bob)
        orders = [await place(base_url, ada) for _ in range(3)]
        async with httpx.AsyncClient(base_url=base_url, headers=ada.headers) as client:

            async def all_published() -> bool:
                page = (await client.get("/v1/events")).json()
                return len(page["data"]) == 3

            await eventually(all_published)
            first = (await client.get("/v1/events", params={"limit": 2})).json()
            second = (await client.get("/v1/events", params={"after": first["next_cursor"]})).json()
            empty = (await client.get("/v1/events", params={"after": second["next_cursor"]})).json()
            bad = await client.get("/v1/events", params={"after": "-3"})
        assert [e["order_id"] for e in first["data"] + second["data"]] == orders
        # Ids are the account's own, one after another: Bob's event is not among them.
        assert [e["id"] for e in first["data"] + second["data"]] == [1, 2, 3]
        assert first["next_cursor"] == first["data"][-1]["id"]
        assert empty == {"data": [], "next_cursor": second["next_cursor"]}
        assert bad.status_code == 422
