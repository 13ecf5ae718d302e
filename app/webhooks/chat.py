"""What a chat app shows for an order event: one sentence, in the body Slack's or Discord's
incoming webhooks take.

Slack takes `{"text": ...}` (its `mrkdwn`: `&`, `<` and `>` escaped, links as `<url|label>`);
Discord takes `{"content": ...}` (at most 2,000 characters, Markdown, links as `[label](url)`),
with mentions turned off so that an order's name cannot ping anyone. The standard format is the
stored payload itself. The sentence is built from that payload, so every format says the same.
"""

import json
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from app.core.money import format_usd
from app.core.states import WebhookFormat
from app.providers.registry import display_name

DISCORD_MAX_CHARS = 2000
_DISCORD_SPECIAL = re.compile(r"([\\*_~`|>\[\]()<@#:-])")


def chat_body(format: WebhookFormat, payload: str, *, public_url: str | None) -> str:
    """The request body for an endpoint of `format`, from an event's standard payload."""
    if format == WebhookFormat.STANDARD:
        return payload
    event = json.loads(payload)
    page = "account" if event["type"].startswith("account.") else f"orders/{event['data']['id']}"
    url = f"{public_url.rstrip('/')}/#/{page}" if public_url else None
    if format == WebhookFormat.SLACK:
        text = sentence(event, escape=_slack_escape, link=lambda label: _slack_link(label, url))
        return json.dumps({"text": text}, ensure_ascii=False)
    text = sentence(event, escape=_discord_escape, link=lambda label: _discord_link(label, url))
    body = {"content": text[:DISCORD_MAX_CHARS], "allowed_mentions": {"parse": []}}
    return json.dumps(body, ensure_ascii=False)


def sentence(
    event: dict[str, Any], *, escape: Callable[[str], str], link: Callable[[str], str]
) -> str:
    """One sentence a person reads: the order, the machine, the price and, once running, the IP.

    `escape` makes text the user chose safe for the app; `link` turns the order's label into a
    link to it, where there is one."""
    if event["type"].startswith("account."):
        return _account_sentence(event, escape=escape, link=link)
    order = event["data"]
    order_id = escape(order["id"])
    who = link(f"{escape(order['name'])} ({order_id})" if order.get("name") else order_id)
    wanted = f"{order['gpu_count']}x {order['gpu_model']}"
    if (order.get("nodes") or 1) > 1:
        wanted = f"{order['nodes']} nodes of {wanted}"
    ceiling = f"up to {_usd(order['max_price_per_hour'])}/h"
    deployment = order.get("deployment") or {}
    where = ""
    if deployment:
        provider = _provider_name(deployment["provider"])
        where = f"{provider} {deployment['region']} {deployment['instance_type']}"
        price = f"{_usd(deployment['price_per_hour_with_fees'])}/h incl. fees"
    match event["type"]:
        case "order.deployed":
            return f"Order {who} deployed: {wanted} on {where} at {price}; it is starting."
        case "order.running":
            ip = deployment.get("ip") or "no address yet"
            inner = {m.get("ip") for m in order.get("machines") or []}
            if order.get("login_ip") and order["login_ip"] not in inner:
                ip = f"{ip} (its login node)"  # nodes put together have no login node
            return f"Order {who} is running: {wanted} on {where} at {ip}, {price}."
        case "order.cancelled":
            return f"Order {who} ({wanted}, {ceiling}) was cancelled."
        case "order.expired":
            return f"Order {who} ({wanted}, {ceiling}) expired without a machine."
        case "order.failed":
            on = f" on {where}" if where else ""
            return f"Order {who} ({wanted}) failed{on}."
        case "order.terminating":
            why = ENDED_BECAUSE.get(order.get("terminate_reason") or "", "asked for")
            return f"Order {who} ({wanted}{_on(where)}) is terminating: {why}."
        case "order.terminated":
            why = ENDED_BECAUSE.get(order.get("terminate_reason") or "", "asked for")
            charged = _usd(order.get("charged_usd") or "0")
            return f"Order {who} ({wanted}{_on(where)}) was terminated ({why}): {charged} in all."
        case "order.lost":
            charged = _usd(order.get("charged_usd") or "0")
            return (
                f"Order {who} lost its machine ({wanted}{_on(where)}): the provider ended it; "
                f"billing stopped, {charged} in all."
            )
        case "order.progress":
            stage = escape(str(deployment.get("stage") or "a stage"))
            return f"Order {who}'s machine ({wanted}{_on(where)}) reports: {stage}."
        case "order.ready":
            tunnel = order.get("serve_tunnel")
            reach = f"; reach it with {escape(tunnel)}" if tunnel else ""
            return f"Order {who} is ready: {wanted}{_on(where)} answered a completion{reach}."
        case "order.not_ready":
            said = escape(str(deployment.get("stage_detail") or "no reason given"))
            return f"Order {who}'s machine ({wanted}{_on(where)}) reports it failed: {said}."
        case "order.node_lost":
            left = sum(1 for m in order.get("machines") or [] if m.get("state") == "running")
            return f"Order {who} ({wanted}{_on(where)}) lost a node: {left} still running; " + (
                "terminating the rest."
                if order.get("on_node_lost") == "terminate"
                else "terminate it to end them all."
            )
    return f"Order {who} ({wanted}): {escape(str(event['type']))}."


ENDED_BECAUSE = {
    "requested": "asked for by its owner",
    "admin": "by the operator",
    "unpaid": "a billing hour was not paid in time",
    "max_runtime": "its max runtime was reached",
    "max_total": "its max total was reached",
    "node_lost": "its provider lost a node of the cluster",
}


def _on(where: str) -> str:
    return f" on {where}" if where else ""


def _account_sentence(
    event: dict[str, Any], *, escape: Callable[[str], str], link: Callable[[str], str]
) -> str:
    account = event["data"]
    who = link(escape(account.get("name") or account["id"]))
    if event["type"] == "account.low_balance":
        return (
            f"Account {who} is low on balance: {_usd(account['available'])} available pays "
            f"{account['runway_hours']} h of its machines ({_usd(account['hourly_spend'])}/h). "
            "Top up, or they are terminated when an hour cannot be paid."
        )
    return f"Account {who}: {escape(str(event['type']))}."


def _usd(amount: str) -> str:
    return format_usd(Decimal(amount))


def _provider_name(name: str) -> str:
    try:
        return display_name(name)
    except LookupError:  # a provider this version no longer has
        return name


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_link(label: str, url: str | None) -> str:
    return f"<{url}|{label}>" if url else label


def _discord_escape(text: str) -> str:
    return _DISCORD_SPECIAL.sub(r"\\\1", text)


def _discord_link(label: str, url: str | None) -> str:
    return f"[{label}]({url})" if url else label
