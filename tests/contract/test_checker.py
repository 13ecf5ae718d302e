"""The contract checker itself: what it accepts, and that it catches a field renamed on either
side (each refusal below has the accepted exchange beside it as its positive control)."""

import json
from pathlib import Path
from typing import Any

import pytest

from app.simulators.exchanges import Exchange
from scripts import derive_provider_specs
from tests.contract.checker import OUR_USER_AGENT, contract_for

UUID = "0dc16ed0-f7fb-4eec-a5e6-004e082bb1f4"
VERDA_CREATE = {
    "instance_type": "8B300.240V",
    "image": "ubuntu-24.04-cuda-12.8-open-docker",
    "hostname": "ap-01jd3x-1",
    "description": "autoprovision ap-order-01jd3x",
    "location_code": "FIN-03",
    "is_spot": False,
    "os_volume": {"name": "ap-01jd3x-1-os", "size": 100},
    "tags": [{"key": "autoprovision", "value": "ap-order-01jd3x"}],
}
VERDA_DELETE = {"action": "delete", "id": [UUID], "volume_ids": [UUID], "delete_permanently": True}


def exchange(
    method: str,
    path: str,
    body: Any = None,
    *,
    status: int = 0,
    answer: Any = None,
    answer_type: str = "application/json",
    ours: bool = True,
    query: list[tuple[str, str]] | None = None,
) -> Exchange:
    headers = {"user-agent": f"{OUR_USER_AGENT}0.1" if ours else "python-requests/2"}
    headers |= {"authorization": "Bearer ***", "api_key": "***"}
    raw = b"" if body is None else json.dumps(body).encode()
    if body is not None:
        headers["content-type"] = "application/json"
    answered = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
    return Exchange(
        method, path, query or [], headers, raw, status, answer_type if status else "", answered
    )


def verda_problems(item: Exchange) -> list[str]:
    contract = contract_for("verda")
    assert contract is not None
    return contract.problems(item)


def hyperstack_problems(item: Exchange) -> list[str]:
    contract = contract_for("hyperstack")
    assert contract is not None
    return contract.problems(item)


class TestRequests:
    def test_what_the_adapter_sends_is_accepted(self) -> None:
        assert verda_problems(exchange("POST", "/v1/instances", VERDA_CREATE)) == []
        assert verda_problems(exchange("PUT", "/v1/instances", VERDA_DELETE)) == []

    def test_a_renamed_request_field_is_caught(self) -> None:
        renamed = {k if k != "volume_ids" else "volume_id": v for k, v in VERDA_DELETE.items()}
        (problem,) = verda_problems(exchange("PUT", "/v1/instances", renamed))
        assert "body.volume_id is not in the document" in problem

    def test_a_missing_required_field_is_caught(self) -> None:
        body = {k: v for k, v in VERDA_CREATE.items() if k != "location_code"}
        problems = verda_problems(exchange("POST", "/v1/instances", body))
        assert any("location_code" in p and "required" in p for p in problems)

    def test_a_wrong_type_is_caught(self) -> None:
        body = VERDA_CREATE | {"startup_script_id": None}
        problems = verda_problems(exchange("POST", "/v1/instances", body))
        assert any("startup_script_id" in p for p in problems)

    def test_an_operation_not_in_the_document_is_caught(self) -> None:
        (problem,) = verda_problems(exchange("POST", "/v1/instances/action", {"action": "x"}))
        assert "not an operation of the derived document" in problem

    def test_a_query_parameter_of_the_wrong_type_is_caught(self) -> None:
        good = exchange("GET", "/v1/scripts", query=[("page", "2"), ("pageSize", "100")])
        bad = exchange("GET", "/v1/scripts", query=[("page", "two")])
        assert verda_problems(good) == []
        assert verda_problems(bad) != []

    def test_hyperstack_security_rules_need_no_vm_id(self) -> None:
        """The allow-list's `Create_Security_Rule_Payload` entry (the Python SDK's shape)."""
        body = {
            "name": "ap-01jd3x-1",
            "environment_name": "autoprovision-canada-1",
            "flavor_name": "n3-H100x1",
            "image_name": "Ubuntu Server 22.04 LTS R535 CUDA 12.2",
            "key_name": "autoprovision",
            "count": 1,
            "assign_floating_ip": True,
            "labels": ["ap-order-01jd3x"],
            "security_rules": [
                {"direction": "ingress", "protocol": "tcp", "ethertype": "IPv4",
                 "remote_ip_prefix": "0.0.0.0/0", "port_range_min": 22, "port_range_max": 22}
            ],
        }  # fmt: skip
        assert hyperstack_problems(exchange("POST", "/v1/core/virtual-machines", body)) == []
        renamed = {k if k != "flavor_name" else "flavour_name": v for k, v in body.items()}
        assert hyperstack_problems(exchange("POST", "/v1/core/virtual-machines", renamed)) != []

    def test_requests_others_send_are_not_ours_to_check(self) -> None:
        wrong = exchange("PUT", "/v1/instances", {"action": "explode"}, ours=False)
        assert verda_problems(wrong) == []
        assert verda_problems(exchange("PUT", "/v1/instances", {"action": "explode"})) != []


BALANCE = {"amount": 50.5, "currency": "usd"}


class TestAnswers:
    def test_an_answer_as_the_document_says_is_accepted(self) -> None:
        item = exchange("GET", "/v1/balance", status=200, answer=BALANCE)
        assert verda_problems(item) == []

    def test_a_renamed_answer_field_is_caught(self) -> None:
        renamed = {"amount_usd": 50.5, "currency": "usd"}
        missing, invented = verda_problems(
            exchange("GET", "/v1/balance", status=200, answer=renamed)
        )
        assert "'amount' is a required property" in missing
        assert "answer.amount_usd is not in the document" in invented

    def test_a_renamed_answer_field_is_caught_where_nothing_is_required(self) -> None:
        """Hyperstack's document requires no field of an answer: the name is what tells."""
        credit = {"credit": 12.5, "threshold": 0, "can_create_instance": True}
        good = {"status": True, "message": "Success", "data": credit}
        renamed = good | {"data": {"credits": 12.5, "threshold": 0}}
        path = "/v1/billing/user-credit/credit"
        assert hyperstack_problems(exchange("GET", path, status=200, answer=good)) == []
        (problem,) = hyperstack_problems(exchange("GET", path, status=200, answer=renamed))
        assert "answer.data.credits is not in the document" in problem

    def test_a_bare_id_is_accepted_where_the_sdks_read_one_and_json_elsewhere(self) -> None:
        created = exchange(
            "POST", "/v1/instances", VERDA_CREATE, status=202, answer=UUID.encode(),
            answer_type="text/plain; charset=utf-8",
        )  # fmt: skip
        assert verda_problems(created) == []
        as_text = exchange(
            "GET", "/v1/balance", status=200, answer=b"50.5", answer_type="text/plain"
        )
        assert verda_problems(as_text) != []

    def test_an_undescribed_error_carries_the_providers_error_body(self) -> None:
        refused = {
            "code": "forbidden_action",
            "message": "Can't discontinue a discontinued instance",
        }
        good = exchange("PUT", "/v1/instances", VERDA_DELETE, status=403, answer=refused)
        bad = exchange("PUT", "/v1/instances", VERDA_DELETE, status=403, answer={"error": "no"})
        assert verda_problems(good) == []
        assert any("error body" in p for p in verda_problems(bad))

    def test_an_answer_a_fault_shaped_is_not_held_to_the_document(self) -> None:
        broken = exchange("GET", "/v1/balance", status=200, answer=b'{"truncated": [1')
        assert verda_problems(broken) != []
        broken.answer += b" "  # another exchange: the checker remembers the first
        broken.shaped_by_fault = True
        assert verda_problems(broken) == []


class TestDerivedDocuments:
    def test_they_hold_no_vendor_prose_and_say_where_they_came_from(self) -> None:
        for name in ("verda", "hyperstack"):
            text = (Path(derive_provider_specs.DEFAULT_OUT) / f"{name}.json").read_text()
            document = json.loads(text)
            assert document["x-derived"]["sha256"] and document["x-derived"]["from"]
            assert '"summary"' not in text and '"example"' not in text

    def test_they_are_what_the_vendors_documents_give_now(self) -> None:
        """Skipped on a clone without the vendors' documents beside it (../shared)."""
        if not derive_provider_specs.DEFAULT_SPECS.exists():
            pytest.skip("the vendors' documents are not beside this clone")
        assert derive_provider_specs.main(["--check"]) == 0

    def test_every_operation_the_adapters_use_is_in_them(self) -> None:
        for name, source in derive_provider_specs.SOURCES.items():
            document = json.loads((derive_provider_specs.DEFAULT_OUT / f"{name}.json").read_text())
            for method, path in source["used"]:
                assert method in document["paths"][path], (name, method, path)
