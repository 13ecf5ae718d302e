"""Verda's parse functions on answers recorded from the simulator (tests/providers/verda/)."""

import json
from datetime import UTC
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.core.catalogue import ClusterInterconnect, Interconnect, Provider
from app.providers.base import Unavailable, VMState
from app.providers.verda import cluster_parse, parse

RECORDED = Path(__file__).parent / "verda"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFkkEa055eQN0BuHueKXxmUstrKN6gSW77TuOls8f542"


def recorded(name: str) -> Any:
    return json.loads((RECORDED / f"{name}.json").read_text())


def test_offers_are_instance_types_priced_where_they_are_in_stock() -> None:
    types = parse.instance_types(recorded("instance_types"))
    pairs = parse.availability(recorded("instance_availability"))
    assert ("8B300.240V", "FIN-03") in pairs and ("1H100.80S.30V", "FIN-01") in pairs
    offers = {
        (o.sku, o.region): o for sku, region in pairs if (o := parse.offer(types[sku], region))
    }
    b300 = offers[("8B300.240V", "FIN-03")]
    assert (b300.provider, b300.gpu_model, b300.gpu_count) == (Provider("verda"), "B300", 8)
    assert (b300.price_per_hour, b300.interconnect) == (Decimal("45.52"), Interconnect.SXM)
    assert (b300.vcpus, b300.ram_gb, b300.disk_gb, b300.disk_fixed) == (240, 2200, None, False)
    assert offers[("1A100.22V", "FIN-01")].gpu_model == "A100-80G"
    assert not any(sku.startswith("CPU.") for sku, _ in offers)  # CPU types are no GPU offers


def test_b300_is_b300_whatever_memory_verda_prints() -> None:
    # Production says "B300 SXM6 268GB"; the figure is dropped, only the name counts.
    for label, total in (("8x B300 SXM6 268GB", 2144), ("8x B300 SXM6 262GB", 2096)):
        assert parse.gpu_model(None, label, 8, total) == "B300"
        assert parse.gpu_model("B300", label, 8, total) == "B300"
    b300 = parse.instance_types(recorded("instance_types"))["8B300.240V"]
    assert b300["gpu"]["description"] == "8x B300 SXM6 268GB"
    made = parse.offer({**b300, "model": None}, "FIN-03")
    assert made is not None and (made.gpu_model, made.interconnect) == ("B300", Interconnect.SXM)


def test_an_instance_in_its_states_and_with_our_tag() -> None:
    pending = parse.instance(recorded("instance_pending"), "any")
    running = parse.instance(recorded("instance_running"), "any")
    assert pending.state is VMState.PENDING and pending.ip is None
    assert (running.state, running.provider_status, running.ip) == (
        VMState.RUNNING,
        "running",
        "203.0.113.1",
    )
    assert (running.name, running.region, running.sku) == (
        "ap-01jd3xq8w1-1",
        "FIN-01",
        "1H100.80S.30V",
    )
    assert running.tags == ("ap-order-01jd3xq8w1",)
    assert running.created_at is not None and running.created_at.tzinfo is UTC
    assert [vm.id for vm in parse.instances(recorded("instances_tagged"))] == [running.id]


def test_unknown_statuses_and_tags_of_others() -> None:
    body = {**recorded("instance_running"), "status": "levitating"}
    body["tags"] = [{"key": "team", "value": "ml"}, {"key": "solo"}]
    vm = parse.instance(body, "any")
    assert (vm.state, vm.provider_status) == (VMState.UNKNOWN, "levitating")
    assert vm.tags == ("team=ml", "solo")


def test_answers_of_the_wrong_shape_are_unavailable() -> None:
    for read, body in (
        (parse.instance_types, {"error": "x"}),
        (parse.availability, None),
        (parse.instances, {"data": []}),
        (parse.balance, {"currency": "usd"}),
        (lambda b: parse.instance(b, "vm-1"), {"status": "running"}),
    ):
        with pytest.raises(Unavailable):
            read(body)


def test_the_created_id_comes_bare_quoted_or_in_an_object() -> None:
    vm_id = "8b57e795-9d2b-408e-b15b-a53e83dceea5"
    for text in (vm_id, f'"{vm_id}"', json.dumps({"id": vm_id}), f"  {vm_id}\n"):
        assert parse.created_id(text) == vm_id
    for text in ("", "null", '{"id": 7}', "not an id!", '"short"'):
        assert parse.created_id(text) is None


def test_ssh_keys_are_found_by_type_and_body_whatever_the_comment() -> None:
    keys = recorded("ssh_keys")
    assert parse.ssh_key_id(keys, f"{SSH_KEY} someone@else") == keys[0]["id"]
    assert parse.ssh_key_id(keys, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAOTHER") is None


def test_the_balance_is_a_decimal() -> None:
    assert parse.balance(recorded("balance")) == Decimal(str(recorded("balance")["amount"]))


def test_cluster_types_and_cluster_availability() -> None:
    types = cluster_parse.cluster_types(recorded("cluster_types"))
    assert types["16B200"]["price_per_hour"] == "71.84"
    assert types["16B200"]["gpu"]["number_of_gpus"] == 16
    pairs = cluster_parse.cluster_availability(recorded("cluster_availability"))
    assert sorted(pairs) == [("16B200", "FIN-01"), ("16B300", "FIN-03")]
    with pytest.raises(Unavailable, match="/cluster-availability"):
        cluster_parse.cluster_availability({"location_code": "FIN-01"})


def test_a_cluster_is_one_object_with_its_nodes_and_its_jump_host() -> None:
    ordered = cluster_parse.cluster_of(recorded("cluster_ordered"), "any")
    running = cluster_parse.cluster_of(recorded("cluster_running"), "any")
    assert ordered.id == running.id
    assert (ordered.status, ordered.state, ordered.login_ip) == ("ordered", VMState.PENDING, None)
    assert (running.status, running.state, running.login_ip) == (
        "running",
        VMState.RUNNING,
        "203.0.113.1",
    )
    assert (running.hostname, running.location, running.cluster_type) == (
        "ap-01jd3xq8w1-1",
        "FIN-01",
        "16B200",
    )
    assert running.created_at is not None and running.created_at.tzinfo == UTC
    assert [(n.hostname, n.private_ip, n.status) for n in running.nodes] == [
        ("ap-01jd3xq8w1-1-node-1", "10.8.1.2", "running"),
        ("ap-01jd3xq8w1-1-node-2", "10.8.1.3", "running"),
    ]
    assert [n.id for n in running.nodes] == [n.id for n in ordered.nodes]
    assert len({n.id for n in running.nodes}) == 2


def test_cluster_states_unknown_words_and_odd_shapes() -> None:
    data = recorded("cluster_running")
    for status, state in (
        ("provisioning", VMState.PENDING),
        ("discontinued", VMState.GONE),
        ("error", VMState.FAILED),
        ("reticulating_splines", VMState.UNKNOWN),
    ):
        found = cluster_parse.cluster({**data, "status": status})
        assert found is not None and (found.status, found.state) == (status, state)
    nodes = [{"status": "running"}, 7]
    odd = cluster_parse.cluster({**data, "status": None, "worker_nodes": nodes})
    assert odd is not None and (odd.status, odd.state, odd.nodes) == (
        "unknown",
        VMState.UNKNOWN,
        (),
    )
    assert cluster_parse.cluster({"status": "running"}) is None
    listed = cluster_parse.clusters([data, {"no": "id"}])
    assert [c.id for c in listed] == [data["id"]]
    with pytest.raises(Unavailable):
        cluster_parse.clusters({"id": data["id"]})
    with pytest.raises(Unavailable):
        cluster_parse.cluster_of([], "x")


def test_a_cluster_type_is_an_offer_of_its_nodes_at_the_whole_price() -> None:
    types = cluster_parse.cluster_types(recorded("cluster_types"))
    disk = Decimal("0.2") / 730
    made = cluster_parse.cluster_offer(types["16H200"], "ICE-01", disk)
    assert made is not None
    assert (made.sku, made.region, made.gpu_model, made.gpu_count, made.nodes) == (
        "16H200", "ICE-01", "H200", 8, 2,
    )  # fmt: skip
    assert made.price_per_hour == Decimal(types["16H200"]["price_per_hour"])  # the whole's
    assert (made.interconnect, made.cluster_interconnect) == (
        Interconnect.SXM,
        ClusterInterconnect.INFINIBAND,
    )
    assert (made.vcpus, made.ram_gb) == (  # per node
        types["16H200"]["cpu"]["number_of_cores"] // 2,
        types["16H200"]["memory"]["size_in_gigabytes"] // 2,
    )
    assert (made.disk_gb, made.disk_fixed, made.disk_price_per_gb_hour) == (None, False, disk)
    four = cluster_parse.cluster_offer(types["32B300"], "FIN-03")
    assert four is not None and (four.gpu_model, four.gpu_count, four.nodes) == ("B300", 8, 4)


def test_a_cluster_types_nodes_come_from_its_details_or_its_gpus() -> None:
    b200 = cluster_parse.cluster_types(recorded("cluster_types"))["16B200"]
    four_of_four = {**b200, "node_details": ["4x 4 GPU nodes", "400 Gb/s InfiniBand"]}
    assert cluster_parse.nodes_of(four_of_four) == 4
    assert cluster_parse.nodes_of({**b200, "node_details": None}) == 2  # 16 GPUs / 8
    assert cluster_parse.nodes_of({**b200, "node_details": ["lots of nodes"]}) == 2
    assert cluster_parse.nodes_of({**b200, "node_details": ["3x 8 GPU nodes"]}) == 2  # not 16
    odd = {**b200, "node_details": [], "gpu": {"number_of_gpus": 12}}
    assert cluster_parse.nodes_of(odd) is None
    assert cluster_parse.cluster_offer(odd, "FIN-01") is None
    voodoo = {
        **b200,
        "model": "Voodoo 5",
        "gpu": {"description": "16x Voodoo 5", "number_of_gpus": 16},
    }
    assert cluster_parse.cluster_offer(voodoo, "FIN-01") is None
    assert cluster_parse.cluster_offer(b200, "FIN-01") is not None  # the control


def test_a_cluster_is_a_vm_with_its_nodes_as_machines() -> None:
    running = cluster_parse.cluster_of(recorded("cluster_running"), "any")
    made = cluster_parse.cluster_vm(running)
    assert made.id == f"cluster:{running.id}"
    assert cluster_parse.cluster_id_of(made.id) == running.id
    assert cluster_parse.cluster_id_of(running.id) is None  # an instance's id
    assert (made.state, made.ip, made.sku, made.tags) == (
        VMState.RUNNING, "203.0.113.1", "16B200", ("ap-order-01jd3xq8w1",),
    )  # fmt: skip
    assert [(m.name, m.ip, m.state) for m in made.machines] == [
        ("ap-01jd3xq8w1-1-node-1", "10.8.1.2", VMState.RUNNING),
        ("ap-01jd3xq8w1-1-node-2", "10.8.1.3", VMState.RUNNING),
    ]
    assert cluster_parse.tag_of("someone else's cluster") is None
    assert cluster_parse.tag_of(cluster_parse.description("ap-order-x")) == "ap-order-x"
