"""What Slack's and Discord's incoming webhooks accept, as their documentation says, for a
`Receiver` to refuse the rest the way they do.

Slack (api.slack.com/messaging/webhooks, "Handling errors"): a JSON body with a non-empty `text`
(or `blocks`), answered `200 ok`; otherwise `400 invalid_payload` (not JSON) or `400 no_text`.
Discord (discord.com/developers/docs/resources/webhook#execute-webhook): a JSON body with
`content` (at most 2,000 characters), `embeds` or files, answered `204`; otherwise `400` with
code 50006 "Cannot send an empty message", or a field error for a `content` too long.
"""

import json
from typing import Any

from tests.webhooks.receiver import Answer, Received

SLACK_OK = Answer(200, body="ok")
DISCORD_OK = Answer(204, body="")


def _json_object(request: Received) -> dict[str, Any] | None:
    if not request.headers.get("content-type", "").startswith("application/json"):
        return None
    try:
        body = json.loads(request.body)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def slack_refusal(request: Received) -> Answer | None:
    """Slack's answer to a body it does not take; None for one it shows."""
    body = _json_object(request)
    if body is None:
        return Answer(400, body="invalid_payload")
    text, blocks = body.get("text"), body.get("blocks")
    if not (isinstance(text, str) and text.strip()) and not blocks:
        return Answer(400, body="no_text")
    return None


def discord_refusal(request: Received) -> Answer | None:
    """Discord's answer to a body it does not take; None for one it shows."""
    body = _json_object(request)
    if body is None:
        return Answer(
            400, body=json.dumps({"message": "Cannot send an empty message", "code": 50006})
        )
    content = body.get("content")
    if isinstance(content, str) and len(content) > 2000:
        return Answer(400, body=json.dumps({"content": ["Must be 2000 or fewer in length."]}))
    if not (isinstance(content, str) and content.strip()) and not body.get("embeds"):
        return Answer(
            400, body=json.dumps({"message": "Cannot send an empty message", "code": 50006})
        )
    return None
