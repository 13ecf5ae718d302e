"""Whether a create refusal names the request itself: decided by the fields our body sent,
never by what else the message says."""

import httpx
import pytest

from app.core.catalogue import Provider
from app.providers.base import Refused, Rejected
from app.providers.refusals import create_refusal, fields_named, sent_fields

VERDA = Provider("verda")
SENT = ("instance_type", "image", "location_code", "hostname")


def refusal(status: int, code: str | None, said: str | None) -> Rejected | Refused:
    return create_refusal(
        VERDA,
        where="create 1H100.80S.30V in FIN-01",
        status=status,
        code=code,
        said=said,
        sent=SENT,
        input_codes=("invalid_request",),
    )


@pytest.mark.parametrize(
    ("said", "named"),
    [
        ("location_code: FIN-09 is not a location", ["location_code"]),
        ("Invalid image", ["image"]),
        ("os_volume.size and image are wrong", ["image"]),
        ("Invalid instance type", []),  # spaced: capacity answers speak so too
        ("Image is no good", []),  # spelled otherwise than our body spells it
        ("imagery", []),  # not a whole word
        ("GPU_QUOTA_EXCEEDED: limit exceeded", []),
        (None, []),
    ],
)
def test_a_field_is_named_by_its_exact_spelling_as_a_whole_word(
    said: str | None, named: list[str]
) -> None:
    assert fields_named(said, SENT) == named


def test_an_input_error_naming_our_field_is_rejected() -> None:
    rejected = refusal(400, "invalid_request", "location_code FIN-09 is unknown")
    assert isinstance(rejected, Rejected) and rejected.status_code == 400
    assert "naming location_code of the request" in rejected.message


@pytest.mark.parametrize(
    ("status", "code", "said"),
    [
        (400, "invalid_request", "GPU quota exceeded"),  # names nothing of ours
        (403, "forbidden_action", "location_code is closed"),  # not an input error
        (409, "conflict", "image in use"),
        (400, "quota_exceeded", "image quota reached"),  # another code than the input error's
        (404, None, None),
    ],
)
def test_any_other_refusal_is_refused_with_what_the_provider_said(
    status: int, code: str | None, said: str | None
) -> None:
    refused = refusal(status, code, said)
    assert isinstance(refused, Refused)
    assert (refused.status_code, refused.reason, refused.said) == (status, code, said)


def test_what_the_provider_said_is_quoted_and_bounded_in_our_message() -> None:
    said = "quota\u202e reached " + "x" * 500
    refused = refusal(400, "invalid_request", said)
    assert isinstance(refused, Refused)
    assert "\u202e" not in refused.message and "\\u202e" in refused.message
    assert len(refused.message) < 250
    assert refused.said == said  # kept whole (to 1,000 characters) for whoever quotes it


def test_a_code_that_names_our_field_rejects_whatever_the_message() -> None:
    rejected = create_refusal(
        Provider("quantacloud"),
        where="POST /deployments",
        status=404,
        code="provider_not_found",
        said="Not found.",
        sent=("provider", "offer_id"),
        input_codes=("validation_error",),
        code_names={"provider_not_found": "provider"},
    )
    assert isinstance(rejected, Rejected) and "naming provider" in rejected.message


@pytest.mark.parametrize(
    ("request_", "fields"),
    [
        (httpx.Request("POST", "http://x/", json={"a_b": 1, "c": [2]}), {"a_b", "c"}),
        (httpx.Request("POST", "http://x/", json=["a_b"]), set()),
        (httpx.Request("POST", "http://x/", content=b"not json"), set()),
        (httpx.Request("GET", "http://x/"), set()),
    ],
)
def test_the_fields_sent_are_the_json_objects_top_level_keys(
    request_: httpx.Request, fields: set[str]
) -> None:
    assert sent_fields(request_) == fields
