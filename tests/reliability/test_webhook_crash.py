"""Receiver down for several retries, the service SIGKILLed in between, then the receiver up:
every event still arrives, signed, under the webhook-id it was first sent with.

The simulators and the receiver run outside the service, so they outlive the kill as a real
provider and a real customer would. The receiver answers 503 at once, so the kill mostly finds
no request out; when it does cut one off, that delivery waits for its lease to run out (about
17 s) and the test checks it arrives all the same.
"""

import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from app.storage.models import WebhookDelivery
from tests.factories import ADMIN
from tests.processes import ServiceProcess, SimProcess, query
from tests.waiting import eventually_sync
from tests.webhooks.receiver import Answer, Received, Receiver, running_receiver

HOOK = "/hook"
SKU, REGION = "n3-H100x1", "CANADA-1"  # $2.40/h at hyperstack
RUNNING_ORDERS = 3
WEBHOOK_SETTINGS = {
    "webhook_allow_private": "true",  # the receiver is on loopback, over plain http
    # 12 attempts in all, about half a second apart: room for the retries made before the
    # kill, after the restart and the one that succeeds, without the delivery giving up
    "webhook_retry_schedule": "[0,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5]",
    "webhook_poll_seconds": "0.1",
    "webhook_timeout_seconds": "2",
}
DOWN = Answer(status=503, body="down for maintenance")
UP = Answer(status=200)

Pair = tuple[str, str]  # (event type, order id)


def start_service(workdir: Path, database_url: str, sim_process: SimProcess) -> ServiceProcess:
    return ServiceProcess(workdir, database_url, sim_process, **WEBHOOK_SETTINGS)


def answer_from_now_on(receiver: Receiver, answer: Answer) -> int:
    """Switch the receiver's answer to HOOK; returns how many requests had arrived before.

    Done under the receiver's lock, so every request counted got the old answer and every
    later one gets the new answer.
    """
    with receiver.lock:
        receiver.default[HOOK] = answer
        return len(receiver.received)


class Client:
    """The account's view: orders, the endpoint and its deliveries, through the public API."""

    def __init__(self, service: ServiceProcess, sim_process: SimProcess) -> None:
        self.api = httpx.Client(base_url=service.url, timeout=10)
        self.sim = sim_process.control
        created = self.api.post("/v1/accounts", json={"name": "webhooks"}, headers=ADMIN)
        assert created.status_code == 201, created.text
        account = created.json()
        self.headers = {"Authorization": f"Bearer {account['api_key']}"}
        credit = self.api.post(
            f"/v1/accounts/{account['id']}/credits", json={"amount": "100"}, headers=ADMIN
        )
        assert credit.status_code == 201, credit.text

    def use(self, service: ServiceProcess) -> None:
        """Talk to this (restarted) service from now on."""
        self.api.base_url = httpx.URL(service.url)

    def reset_sim(self) -> None:
        self.sim.reset_all()
        self.sim.config("hyperstack", boot_seconds=0.3)

    def stock(self, quantity: int) -> None:
        self.sim.stock("hyperstack", SKU, REGION, quantity)

    def add_endpoint(self, url: str) -> dict[str, Any]:
        answer = self.api.post("/v1/webhook-endpoints", json={"url": url}, headers=self.headers)
        assert answer.status_code == 201, answer.text
        endpoint: dict[str, Any] = answer.json()
        return endpoint

    def place(self, max_price: str) -> str:
        body = {
            "gpu_model": "H100",
            "gpu_count": 1,
            "providers": ["hyperstack"],
            "max_price_per_hour": max_price,
        }
        answer = self.api.post("/v1/orders", json=body, headers=self.headers)
        assert answer.status_code == 201, answer.text
        order_id: str = answer.json()["id"]
        return order_id

    def status(self, order_id: str) -> str:
        answer = self.api.get(f"/v1/orders/{order_id}", headers=self.headers)
        assert answer.status_code == 200, answer.text
        status: str = answer.json()["status"]
        return status

    def cancel(self, order_id: str) -> None:
        answer = self.api.post(f"/v1/orders/{order_id}/cancel", headers=self.headers)
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "cancelled"

    def deliveries(self, endpoint_id: str) -> list[dict[str, Any]]:
        answer = self.api.get(
            f"/v1/webhook-endpoints/{endpoint_id}/deliveries",
            params={"limit": 100},
            headers=self.headers,
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["next_cursor"] is None
        data: list[dict[str, Any]] = body["data"]
        return data


def pair_of(request: Received, secret: str) -> Pair:
    """(type, order id) of a request, once its signature is checked against `secret`."""
    payload = request.verify(secret)
    return payload["type"], payload["data"]["id"]


def test_no_webhook_is_lost_when_the_service_is_killed_while_the_receiver_is_down(
    database_url: str, sim_process: SimProcess, tmp_path: Path
) -> None:
    with running_receiver() as receiver:
        receiver.always(HOOK, DOWN)
        service = start_service(tmp_path, database_url, sim_process)
        try:
            service.wait_until_up()
            client = Client(service, sim_process)
            client.reset_sim()
            endpoint = client.add_endpoint(f"{receiver.url}{HOOK}")
            secret: str = endpoint["secret"]

            running = [client.place("3.00") for _ in range(RUNNING_ORDERS)]
            extra = client.place("1.00")  # below any price: waits until cancelled
            client.stock(RUNNING_ORDERS)
            eventually_sync(
                lambda: all(client.status(o) == "running" for o in running),
                20,
                what="the orders to run",
            )
            assert client.status(extra) == "waiting"
            client.cancel(extra)
            expected = {("order.cancelled", extra)} | {
                (kind, order_id)
                for order_id in running
                for kind in ("order.deployed", "order.running")
            }

            def tries(requests: list[Received]) -> Counter[Pair]:
                return Counter(pair_of(r, secret) for r in requests)

            # Down for several retries: every event refused at least twice before the kill.
            eventually_sync(
                lambda: all(tries(receiver.on(HOOK))[p] >= 2 for p in expected),
                10,
                what="two refused attempts of every event",
            )
            service.kill()
            assert service.process.returncode == -9
            time.sleep(0.2)  # a request the killed service had sent has been taken in by now
            killed = len(receiver.on(HOOK))
            webhook_ids = {pair_of(r, secret): r.headers["webhook-id"] for r in receiver.on(HOOK)}
            # A delivery whose request the kill cut off keeps its lease (timeout + 15 s): it is
            # sent again once that runs out. One endpoint has one request out at a time.
            leased = {
                row.event_id
                for row in query(
                    database_url,
                    select(WebhookDelivery.event_id).where(
                        WebhookDelivery.lease_expires_at.is_not(None)
                    ),
                )
            }
            cut_off = {p for p in expected if webhook_ids[p] in leased}
            assert len(leased) <= 1 and len(cut_off) == len(leased), leased

            service = start_service(tmp_path, database_url, sim_process)
            service.wait_until_up()
            client.use(service)

            def deliveries_now() -> object:
                return client.deliveries(endpoint["id"])

            # Still down: the restarted service takes the deliveries up and is refused again.
            eventually_sync(
                lambda: all(tries(receiver.on(HOOK)[killed:])[p] >= 1 for p in expected - cut_off),
                10,
                what=lambda: (
                    "a refused attempt by the restarted service of every event not cut off: "
                    f"{deliveries_now()}"
                ),
            )
            switched = answer_from_now_on(receiver, UP)
            eventually_sync(
                lambda: set(tries(receiver.on(HOOK)[switched:])) >= expected,
                30,
                what=lambda: f"every event to arrive with the receiver up: {deliveries_now()}",
            )
            eventually_sync(
                lambda: all(d["status"] == "succeeded" for d in client.deliveries(endpoint["id"])),
                10,
                what=lambda: f"every delivery to be recorded as succeeded: {deliveries_now()}",
            )
            deliveries = client.deliveries(endpoint["id"])
            time.sleep(1)  # any further (wrong) request would show up by now
            requests = receiver.on(HOOK)
        finally:
            service.terminate()

    # Every request is signed with the endpoint's secret and is one of the expected events.
    ids: dict[str, set[Pair]] = defaultdict(set)
    payloads: dict[Pair, list[dict[str, Any]]] = defaultdict(list)
    for request in requests:
        payload = request.verify(secret)
        pair = (payload["type"], payload["data"]["id"])
        ids[request.headers["webhook-id"]].add(pair)
        payloads[pair].append(payload)
    assert set(payloads) == expected, "an event is missing, or one no order change made"
    # Retries (across the restart too) kept the event's webhook-id: one id per event.
    assert all(len(pairs) == 1 for pairs in ids.values()), ids
    event_of = {id_: next(iter(pairs)) for id_, pairs in ids.items()}
    assert len(event_of) == len(expected)
    # What the event says about the order does not change between retries.
    for (kind, _order_id), sent in payloads.items():
        assert all(p == sent[0] for p in sent), f"{kind} changed between retries"
        assert sent[0]["data"]["status"] == kind.removeprefix("order.")
    for order_id in running:
        deployed = payloads[("order.deployed", order_id)][0]
        assert deployed["data"]["deployment"]["provider"] == "hyperstack"

    refused = Counter(event_of[r.headers["webhook-id"]] for r in requests[:switched])
    accepted = Counter(event_of[r.headers["webhook-id"]] for r in requests[switched:])
    after_kill = Counter(event_of[r.headers["webhook-id"]] for r in requests[killed:switched])
    assert all(refused[p] >= 2 for p in expected), refused
    assert all(after_kill[p] >= 1 for p in expected - cut_off), after_kill
    # Each event accepted exactly once: a success is recorded and never sent again.
    assert accepted == Counter(expected), accepted

    # The deliveries API tells the same story: refusals first, then the one success.
    assert len(deliveries) == len(expected)
    assert {d["event_id"]: d["event_type"] for d in deliveries} == {
        id_: kind for id_, (kind, _order) in event_of.items()
    }
    for delivery in deliveries:
        attempts = delivery["attempts"]
        assert delivery["status"] == "succeeded", delivery
        times = [a["attempted_at"] for a in attempts]
        assert times == sorted(times), delivery
        *failed, success = attempts
        assert success["status_code"] == 200, delivery
        assert [a["status_code"] for a in failed] == [503] * len(failed), delivery
        assert all(a["response_body"] == DOWN.body for a in failed), delivery
        pair = event_of[delivery["event_id"]]
        # The receiver saw every recorded refusal; the one the kill cut off went unrecorded.
        unrecorded = refused[pair] - len(failed)
        assert unrecorded in ((0, 1) if pair in cut_off else (0,)), (unrecorded, delivery)
        assert failed, delivery
