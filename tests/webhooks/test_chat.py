"""Chat notifications: the sentence each event becomes, and Slack and Discord bodies delivered,
signed, retried and logged like standard ones, to receivers that take only what the apps take."""

import json
from typing import Any

import httpx
import pytest
from pydantic import AnyHttpUrl

from app.core.states import WebhookFormat
from app.settings import Settings
from app.simulators.control import SimControl
from app.webhooks.chat import DISCORD_MAX_CHARS, chat_body
from tests.factories import create_account
from tests.waiting import eventually
from tests.watcher.orders import HYPER_H100, h100, place, reaches
from tests.webhooks.chat_apps import DISCORD_OK, SLACK_OK, discord_refusal, slack_refusal
from tests.webhooks.endpoints import add_endpoint, arrived, cancelled_order, deliveries
from tests.webhooks.receiver import Answer, Receiver

PUBLIC_URL = "https://gpus.example.com"


def event(kind: str, *, name: str | None = None, deployed: bool = True, **fields: Any) -> str:
    """A stored payload as the outbox writes it (the order as its owner sees it)."""
    deployment = {
        "provider": "verda",
        "region": "FIN-01",
        "instance_type": "8B300.240V",
        "provider_vm_id": "vm-1",
        "price_per_hour": "44.00",
        "price_per_hour_with_fees": "46.1",
        "ip": "203.0.113.7" if kind == "order.running" else None,
        "status": "running",
        "created_at": "2026-12-01T09:00:00Z",
    }
    order = {
        "id": "ord_01jd3xq8w1",
        "name": name,
        "status": kind.removeprefix("order."),
        "gpu_model": "B300",
        "gpu_count": 8,
        "max_price_per_hour": "50.00",
        "deployment": deployment if deployed else None,
        **fields,
    }
    return json.dumps({"type": kind, "timestamp": "2026-12-01T09:00:01Z", "data": order})


def slack_text(payload: str, public_url: str | None = None) -> str:
    text: str = json.loads(chat_body(WebhookFormat.SLACK, payload, public_url=public_url))["text"]
    return text


class TestSentences:
    def test_each_event_says_the_order_machine_price_and_once_running_the_ip(self) -> None:
        assert slack_text(event("order.deployed")) == (
            "Order ord_01jd3xq8w1 deployed: 8x B300 on Verda FIN-01 8B300.240V at $46.10/h "
            "incl. fees; it is starting."
        )
        assert slack_text(event("order.running", name="train")) == (
            "Order train (ord_01jd3xq8w1) is running: 8x B300 on Verda FIN-01 8B300.240V at "
            "203.0.113.7, $46.10/h incl. fees."
        )
        cancelled = slack_text(event("order.cancelled", deployed=False))
        assert cancelled == "Order ord_01jd3xq8w1 (8x B300, up to $50.00/h) was cancelled."
        assert "expired without a machine" in slack_text(event("order.expired", deployed=False))
        assert slack_text(event("order.failed")).endswith("failed on Verda FIN-01 8B300.240V.")

    def test_the_end_of_a_machine_says_why_and_what_it_cost(self) -> None:
        terminating = slack_text(event("order.terminating", terminate_reason="max_runtime"))
        assert terminating == (
            "Order ord_01jd3xq8w1 (8x B300 on Verda FIN-01 8B300.240V) is terminating: its max "
            "runtime was reached."
        )
        ended = slack_text(event("order.terminated", terminate_reason="unpaid", charged_usd="92.2"))
        assert ended == (
            "Order ord_01jd3xq8w1 (8x B300 on Verda FIN-01 8B300.240V) was terminated (a billing "
            "hour was not paid in time): $92.20 in all."
        )
        lost = slack_text(event("order.lost", charged_usd="46.10"))
        assert "lost its machine" in lost and "the provider ended it" in lost
        assert lost.endswith("$46.10 in all.")

    def test_what_the_machine_reports_of_itself_is_said_with_its_stage(self) -> None:
        def reported(kind: str, **machine: Any) -> str:
            payload = json.loads(event(kind, serve_tunnel=machine.pop("tunnel", None)))
            payload["data"]["deployment"].update(machine)
            return slack_text(json.dumps(payload))

        assert reported("order.progress", stage="downloading") == (
            "Order ord_01jd3xq8w1's machine (8x B300 on Verda FIN-01 8B300.240V) reports: "
            "downloading."
        )
        tunnel = "ssh -N -L 8000:127.0.0.1:8000 root@203.0.113.7"
        assert reported("order.ready", stage="ready", tunnel=tunnel) == (
            "Order ord_01jd3xq8w1 is ready: 8x B300 on Verda FIN-01 8B300.240V answered a "
            f"completion; reach it with {tunnel}."
        )
        failed = reported("order.not_ready", stage="failed", stage_detail="driver_too_old: 535")
        assert failed.endswith("reports it failed: driver_too_old: 535.")

    def test_a_cluster_says_its_nodes_its_login_node_and_a_lost_node(self) -> None:
        cluster: dict[str, Any] = {"nodes": 2, "gpu_model": "H200"}
        running = slack_text(event("order.running", login_ip="203.0.113.7", **cluster))
        assert running.startswith("Order ord_01jd3xq8w1 is running: 2 nodes of 8x H200 on Verda")
        assert "203.0.113.7 (its login node)" in running
        # Nodes put together (Hyperstack's) are each reached at their own address: no login node.
        nodes = [{"ip": "203.0.113.7"}, {"ip": "203.0.113.8"}]
        pair = slack_text(event("order.running", login_ip="203.0.113.7", machines=nodes, **cluster))
        assert "203.0.113.7" in pair and "login node" not in pair
        machines = [{"state": "failed"}, {"state": "running"}]
        kept = slack_text(event("order.node_lost", machines=machines, **cluster))
        assert "lost a node: 1 still running; terminate it to end them all." in kept
        ended = slack_text(
            event("order.node_lost", machines=machines, on_node_lost="terminate", **cluster)
        )
        assert ended.endswith("lost a node: 1 still running; terminating the rest.")
        why = slack_text(event("order.terminated", terminate_reason="node_lost", **cluster))
        assert "(its provider lost a node of the cluster)" in why

    def test_a_low_balance_says_how_long_it_pays_and_links_to_the_account(self) -> None:
        payload = json.dumps(
            {
                "type": "account.low_balance",
                "timestamp": "2026-12-01T09:00:01Z",
                "data": {
                    "id": "acct_1",
                    "name": "Ada <3",
                    "available": "50.00",
                    "hourly_spend": "46.10",
                    "runway_hours": "1.08",
                },
            }
        )
        text = slack_text(payload, PUBLIC_URL)
        assert text == (
            f"Account <{PUBLIC_URL}/#/account|Ada &lt;3> is low on balance: $50.00 available pays "
            "1.08 h of its machines ($46.10/h). Top up, or they are terminated when an hour "
            "cannot be paid."
        )

    def test_the_standard_format_is_the_stored_payload_itself(self) -> None:
        payload = event("order.deployed")
        assert chat_body(WebhookFormat.STANDARD, payload, public_url=PUBLIC_URL) == payload

    def test_slack_escapes_what_the_user_named_and_links_only_with_a_public_url(self) -> None:
        payload = event("order.running", name="<!channel> a&b")
        text = slack_text(payload, PUBLIC_URL)
        assert "&lt;!channel&gt; a&amp;b" in text and "<!channel>" not in text
        link = f"<{PUBLIC_URL}/#/orders/ord_01jd3xq8w1|&lt;!channel&gt; a&amp;b (ord_01jd3xq8w1)>"
        assert text.startswith(f"Order {link} is running")
        assert "<https://" not in slack_text(payload)  # the control: no public URL, no link

    def test_discord_turns_mentions_off_escapes_markdown_and_keeps_to_its_limit(self) -> None:
        payload = event("order.deployed", name="@everyone [x](https://evil.example) " + "y" * 3000)
        body = json.loads(chat_body(WebhookFormat.DISCORD, payload, public_url=PUBLIC_URL))
        assert body["allowed_mentions"] == {"parse": []}
        content = body["content"]
        assert content.startswith(
            r"Order [\@everyone \[x\]\(https\://evil.example\) y"
        )  # the name cannot make a link of its own or a mention
        assert len(content) == DISCORD_MAX_CHARS
        short = json.loads(
            chat_body(WebhookFormat.DISCORD, event("order.deployed"), public_url=None)
        )
        assert short["content"].startswith("Order ord\\_01jd3xq8w1 deployed: 8x B300 on Verda")


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The webhook tests' settings, with a public URL for the dashboard links."""
    return settings.model_copy(update={"public_url": AnyHttpUrl(PUBLIC_URL)})


def chat_receiver(receiver: Receiver) -> Receiver:
    receiver.check("/slack", slack_refusal)
    receiver.always("/slack", SLACK_OK)
    receiver.check("/discord", discord_refusal)
    receiver.always("/discord", DISCORD_OK)
    return receiver


async def delivered(
    client: httpx.AsyncClient, account: Any, endpoint_id: str, attempts: int = 1
) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        found = await deliveries(client, account, endpoint_id)
        done = [d for d in found if d["status"] == "succeeded"]
        return done[0] if done and len(done[0]["attempts"]) >= attempts else None

    return await eventually(check)


class TestDelivery:
    async def test_a_deploy_reaches_slack_and_discord_as_messages_they_show_signed(
        self, client: httpx.AsyncClient, sim: SimControl, receiver: Receiver
    ) -> None:
        chat_receiver(receiver)
        account = await create_account(client, credit="10")
        slack = await add_endpoint(client, account, f"{receiver.url}/slack", format="slack")
        discord = await add_endpoint(client, account, f"{receiver.url}/discord", format="discord")
        assert (slack["format"], discord["format"]) == ("slack", "discord")
        order_id = await place(client, account, h100(providers=["hyperstack"], name="train"))
        await sim.stock(*HYPER_H100, 1)
        running = await reaches(client, account, order_id, "running")
        ip = running["deployment"]["ip"]
        deployed_s, running_s = await arrived(receiver, "/slack", 2)
        deployed_d, running_d = await arrived(receiver, "/discord", 2)

        # Signed like any delivery: the signature verifies over the body sent.
        texts = [r.verify(slack["secret"])["text"] for r in (deployed_s, running_s)]
        contents = [r.verify(discord["secret"])["content"] for r in (deployed_d, running_d)]
        link = f"<{PUBLIC_URL}/#/orders/{order_id}|train ({order_id})>"
        assert texts[0] == (
            f"Order {link} deployed: 1x H100 on Hyperstack CANADA-1 n3-H100x1 at $2.63/h incl. "
            "fees; it is starting."
        )
        assert f"is running: 1x H100 on Hyperstack CANADA-1 n3-H100x1 at {ip}" in texts[1]
        assert contents[1].startswith(f"Order [train (ord\\_{order_id.removeprefix('ord_')})]")
        assert ip in contents[1] and "$2.63/h incl. fees" in contents[1]
        assert all(slack_refusal(r) is None for r in (deployed_s, running_s))
        assert all(discord_refusal(r) is None for r in (deployed_d, running_d))
        # Logged like any delivery, with the apps' answers.
        for endpoint, code in ((slack, 200), (discord, 204)):
            # The answer is recorded after the receiver has it: wait until both are.
            await delivered(client, account, endpoint["id"])

            async def both_recorded(endpoint_id: str = endpoint["id"]) -> list[Any] | None:
                found = await deliveries(client, account, endpoint_id)
                done = len(found) == 2 and all(d["status"] != "pending" for d in found)
                return found if done else None

            logged = await eventually(both_recorded)
            assert sorted(d["event_type"] for d in logged) == ["order.deployed", "order.running"]
            assert {d["status"] for d in logged} == {"succeeded"}
            assert {a["status_code"] for d in logged for a in d["attempts"]} == {code}

    async def test_a_message_refused_for_a_while_is_retried_and_logged(
        self, client: httpx.AsyncClient, receiver: Receiver
    ) -> None:
        chat_receiver(receiver)
        receiver.plan("/slack", Answer(500), Answer(503, body="busy"))
        account = await create_account(client)
        slack = await add_endpoint(client, account, f"{receiver.url}/slack", format="slack")
        await cancelled_order(client, account)
        attempts = await arrived(receiver, "/slack", 3)
        assert len({a.headers["webhook-id"] for a in attempts}) == 1  # one event, sent again
        assert "was cancelled" in attempts[-1].verify(slack["secret"])["text"]
        delivery = await delivered(client, account, slack["id"], attempts=3)
        assert [a["status_code"] for a in delivery["attempts"]] == [500, 503, 200]
        assert delivery["attempts"][1]["response_body"] == "busy"

    async def test_the_apps_refuse_a_standard_body_which_is_why_the_format_exists(
        self, client: httpx.AsyncClient, receiver: Receiver
    ) -> None:
        """The control for the receivers: a standard endpoint pointed at them is refused as
        the apps refuse it, and the delivery is retried and fails like any refused one."""
        chat_receiver(receiver)
        account = await create_account(client)
        endpoint = await add_endpoint(client, account, f"{receiver.url}/slack")
        assert endpoint["format"] == "standard"
        await cancelled_order(client, account)
        (first, *_) = await arrived(receiver, "/slack", 1)
        assert first.verify(endpoint["secret"])["type"] == "order.cancelled"
        assert slack_refusal(first) == Answer(400, body="no_text")

        async def refused() -> list[dict[str, Any]] | None:
            found = await deliveries(client, account, endpoint["id"])
            attempts = [a for d in found for a in d["attempts"]]
            return attempts if attempts else None

        attempts = await eventually(refused)
        assert attempts[0]["status_code"] == 400 and attempts[0]["response_body"] == "no_text"
