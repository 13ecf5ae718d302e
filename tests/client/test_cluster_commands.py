"""Cluster orders through the client, against a running service (no watcher): `orders place
--nodes`, its cluster options in the body, what `orders get` and `orders list` show, and what the
API refuses (exit 2, its message)."""

import pytest

from tests.client.cli import B300, Account, Autoprovision

# `orders place` arguments: 2 nodes of 8x H200 at Verda, up to $70 an hour for the cluster.
H200_CLUSTER = ("-g", "h200", "-n", "8", "-p", "verda", "--max-price", "70", "--nodes", "2")


def test_a_cluster_order_sends_its_nodes_fabric_and_policy(
    autoprovision: Autoprovision, account: Account
) -> None:
    ran = autoprovision(
        "orders", "place", *H200_CLUSTER, "--cluster-interconnect", "infiniband",
        "--on-node-lost", "terminate", "--json",
    )  # fmt: skip
    assert ran.code == 0, ran.err
    order = ran.json()
    assert (order["gpu_model"], order["gpu_count"], order["nodes"]) == ("H200", 8, 2)
    assert (order["cluster_interconnect"], order["on_node_lost"]) == ("infiniband", "terminate")
    assert order["max_price_per_hour"] == "70.00"
    # Control: without the options, a single machine whose lost node would be kept.
    single = autoprovision("orders", "place", *B300, "--json").json()
    assert (single["nodes"], single["cluster_interconnect"], single["on_node_lost"]) == (
        1,
        None,
        "keep",
    )


def test_people_see_the_nodes_when_placing_getting_and_listing(
    autoprovision: Autoprovision, account: Account
) -> None:
    placed = autoprovision("orders", "place", *H200_CLUSTER)
    assert placed.code == 0, placed.err
    (cluster,) = account.orders()
    cluster_id = cluster["id"]
    assert f"Placed: {cluster_id}, 2 x 8x H200 on verda, up to $70.00/h" in placed.out
    single_id = autoprovision("orders", "place", *B300, "--json").json()["id"]

    got = autoprovision("orders", "get", cluster_id)
    assert got.code == 0, got.err
    assert "2 x 8x H200 on verda, up to $70.00/h incl. fees" in got.out
    (line,) = [row for row in got.lines() if row.startswith("Cluster")]
    assert "2 nodes" in line and "fabric: any" in line and "a node lost: keep the rest" in line
    assert "Machines" not in got.out and "Login IP" not in got.out  # nothing deployed yet
    single = autoprovision("orders", "get", single_id)
    assert "8x B300 on verda" in single.out and "Cluster" not in single.out  # control

    listed = autoprovision("orders", "list")
    (cluster_row,) = [row for row in listed.lines() if row.startswith(cluster_id)]
    (single_row,) = [row for row in listed.lines() if row.startswith(single_id)]
    assert "2 x 8x H200 on verda" in cluster_row
    assert "8x B300 on verda" in single_row and " x 8x" not in single_row


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("--nodes", "17"), "nodes: Input should be less than or equal to 16"),
        (("--nodes", "0"), "nodes: Input should be greater than or equal to 1"),
        (("-p", "verda,quantacloud"), "QuantaCloud makes no clusters"),
        (("--cluster-interconnect", "ethernet"), "cluster_interconnect: Input should be"),
        (("--on-node-lost", "pray"), "on_node_lost: Input should be"),
    ],
)
def test_a_cluster_the_api_refuses_is_exit_2_with_its_message(
    autoprovision: Autoprovision, account: Account, change: tuple[str, str], message: str
) -> None:
    ran = autoprovision("orders", "place", *H200_CLUSTER, *change)
    assert ran.code == 2, ran.err
    assert ran.err.startswith("autoprovision: ") and message in ran.err, ran.err
    assert "(validation_error, HTTP 422)" in ran.err and len(ran.err.splitlines()) == 1
    assert ran.out == "" and account.orders() == []


def test_a_fabric_for_a_single_machine_is_refused(
    autoprovision: Autoprovision, account: Account
) -> None:
    ran = autoprovision("orders", "place", *B300, "--cluster-interconnect", "infiniband")
    assert ran.code == 2 and "cluster_interconnect:" in ran.err, ran.err
    assert account.orders() == []


def test_alternatives_are_sent_as_shapes_after_the_first(
    autoprovision: Autoprovision, account: Account
) -> None:
    ran = autoprovision(
        "orders", "place", "-g", "b300", "-n", "8", "-p", "verda", "--max-price", "55",
        "--alt", "gpu=h200,count=8,nodes=2,max-price=70",
        "--alt", "gpu=b200,count=8,nodes=2,max-price=65,providers=verda+hyperstack",
        "--prefer", "listed",
    )  # fmt: skip
    assert ran.code == 0, ran.err
    (order,) = account.orders()
    shapes = [
        (a["gpu_model"], a["nodes"], a["providers"], a["max_price_per_hour"])
        for a in order["alternatives"]
    ]
    assert shapes == [
        ("B300", 1, ["verda"], "55.00"),
        ("H200", 2, ["verda"], "70.00"),
        ("B200", 2, ["verda", "hyperstack"], "65.00"),
    ]
    assert order["prefer"] == "listed"
    assert "8x B300 on verda, up to $55.00/h or 2 x 8x H200 on verda" in ran.out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("--alt", "gpu=h200,count=8"), "needs max-price"),
        (("--alt", "gpu=h200,count=8,max-price=70,colour=red"), "'colour=red' is not key=value"),
        (("--alt", "gpu=h200,count=8,max-price=cheap"), "is not an amount"),
        (("--prefer", "listed"), "is for orders with --alt"),
        (("--alt", "gpu=h200,count=eight,max-price=70"), "alternatives.1.gpu_count"),
    ],
)
def test_a_bad_alternative_is_exit_2_with_its_message(
    autoprovision: Autoprovision, account: Account, change: tuple[str, str], message: str
) -> None:
    ran = autoprovision("orders", "place", *H200_CLUSTER, *change)
    assert ran.code == 2, ran.err
    assert message in ran.err, ran.err
    assert account.orders() == []
