"""A create the provider refused (a 4xx that is not about our credentials, our rate, our money
or its capacity): `Rejected` when the refusal names the request itself, which fails the order,
and `Refused` otherwise, which leaves it waiting.

"Names the request itself" is decided structurally, the same way at every provider: the answer
is the provider's input error (400 or 422, with its input-error code or none), and its message
holds, as a whole word spelled exactly as our body spells it, a top-level field our create body
sent (`image_name`, `location_code`, `offer_id`). Nothing else of the message decides anything:
a quota, a stock race worded its own way or a rule we do not know all leave the order waiting.
Spaced spellings ("instance type") do not count, because capacity answers use them too (Verda's
"Not enough resources to deploy ... instance type 1V100.6V", verda.md §5).
"""

import json
import re
from collections.abc import Collection, Iterable, Mapping

import httpx

from app.core.catalogue import Provider
from app.core.text import quote
from app.providers.base import Refused, Rejected

INPUT_ERROR_STATUSES = (400, 422)
MESSAGE_QUOTE = 160  # characters of a provider's message put into our own


def sent_fields(request: httpx.Request) -> frozenset[str]:
    """The top-level keys of the JSON object a request sent as its body (none for any other)."""
    try:
        body = json.loads(request.content or b"null")
    except (ValueError, httpx.RequestNotRead):
        return frozenset()
    if not isinstance(body, dict):
        return frozenset()
    return frozenset(key for key in body if isinstance(key, str))


def fields_named(said: str | None, fields: Iterable[str]) -> list[str]:
    """Those of `fields` that `said` holds as whole words, spelled exactly so, sorted."""
    words = set(re.findall(r"[A-Za-z0-9_]+", said or ""))
    return sorted(field for field in fields if field in words)


def create_refusal(
    provider: Provider,
    *,
    where: str,
    status: int,
    code: str | None,
    said: str | None,
    sent: Collection[str],
    input_codes: Collection[str],
    code_names: Mapping[str, str] | None = None,
) -> Rejected | Refused:
    """The outcome of a create refused with `status` and error `code`, saying `said`, whose body
    had the fields `sent`; `input_codes` are the provider's codes for an input error, and
    `code_names` its codes that name a field by themselves (QuantaCloud's `provider_not_found`:
    `provider`), whatever the 4xx."""
    answer = f"{status} {code or 'with no code'}"
    shown = quote(said, MESSAGE_QUOTE) if said else "no message"
    named = set()
    if status in INPUT_ERROR_STATUSES and (code is None or code in input_codes):
        named.update(fields_named(said, sent))
    field = (code_names or {}).get(code or "")
    if field is not None and field in sent:
        named.add(field)
    if named:
        return Rejected(
            provider,
            f"{where}: {answer} naming {', '.join(sorted(named))} of the request: {shown}",
            status_code=status,
        )
    return Refused(
        provider, f"{where}: refused, {answer}: {shown}", status_code=status, reason=code, said=said
    )
