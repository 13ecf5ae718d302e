"""Offers as the watcher keeps them: the snapshot JSON round trip (pure, no database)."""

import json
from dataclasses import replace
from decimal import Decimal

from app.core.catalogue import ClusterInterconnect, Interconnect, Provider
from app.providers.base import Offer
from app.services.offers import offer_from_json, offer_json

VERDA = Offer(
    provider=Provider("verda"),
    region="FIN-01",
    sku="1H100.80S.30V",
    gpu_model="H100",
    gpu_count=1,
    price_per_hour=Decimal("2.59"),
    interconnect=Interconnect.SXM,
    disk_price_per_gb_hour=Decimal("0.2") / 730,
)
INFINIBAND = ClusterInterconnect.INFINIBAND


def test_a_priced_disk_survives_the_snapshot_exactly() -> None:
    stored = json.loads(json.dumps(offer_json(VERDA)))  # what the JSON column gives back
    assert offer_from_json(stored) == VERDA


def test_a_snapshot_kept_before_disks_were_priced_reads_as_no_disk_price() -> None:
    stored = offer_json(VERDA)
    del stored["disk_price_per_gb_hour"]
    assert offer_from_json(stored).disk_price_per_gb_hour == 0


def test_a_cluster_survives_the_snapshot() -> None:
    cluster = replace(VERDA, sku="16B200", nodes=2, cluster_interconnect=INFINIBAND)
    stored = json.loads(json.dumps(offer_json(cluster)))
    assert (stored["nodes"], stored["cluster_interconnect"]) == (2, "infiniband")
    assert offer_from_json(stored) == cluster


def test_a_snapshot_kept_before_offers_had_nodes_reads_as_a_single_machine() -> None:
    stored = offer_json(VERDA)
    del stored["nodes"], stored["cluster_interconnect"]
    assert offer_from_json(stored) == VERDA
