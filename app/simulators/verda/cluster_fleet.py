"""Verda's Instant Clusters as the simulator keeps them: one object each (one id, one bill),
with its worker nodes and a jump host, on the instances' boot clock and billed from the same
wallet. The routes and the JSON are in `clusters.py`."""

import itertools
import time
import uuid
from collections.abc import Iterable
from typing import Any

from app.simulators.core import ProviderSimulator
from app.simulators.vms import CatalogEntry, SimVM


class ClusterFleet(ProviderSimulator):
    """A simulated provider that sells clusters too: each one a `SimVM` of a cluster kind (its
    entry's `nodes`), kept apart from the VMs so no instance call ever sees one."""

    def reset(self) -> None:
        """Also no clusters."""
        super().reset()
        self.clusters: dict[str, SimVM] = {}
        self._subnets = itertools.cycle(range(1, 255))  # each cluster's private 10.8.n.0/24

    def billed(self) -> Iterable[SimVM]:
        """The VMs and the clusters: a cluster bills its whole price from the one wallet."""
        return [*self.vms.values(), *self.clusters.values()]

    def new_cluster(self, entry: CatalogEntry, *, hostname: str) -> SimVM:
        """Make a cluster of `entry`'s kind that starts booting now (failing instead, if a
        `fail_after_accept` fault says so), with its worker nodes and its jump host's IP."""
        cluster = SimVM(
            id=str(uuid.uuid4()),
            entry=entry,
            name=hostname,
            tags=[],
            created_at=time.time(),
            started=self.clock(),
            ip=self.next_ip(),  # the jump host's: the only public address of a cluster
        )
        cluster.fail_after_accept = self.faults.take("fail_after_accept") is not None
        subnet = next(self._subnets)
        cluster.details["worker_nodes"] = [
            {
                "id": str(uuid.uuid4()),
                "hostname": f"{hostname}-node-{n}",
                "private_ip": f"10.8.{subnet}.{n + 1}",
            }
            for n in range(1, entry.nodes + 1)
        ]
        self.clusters[cluster.id] = cluster
        return cluster

    def cluster_status(self, cluster: SimVM) -> str:
        """ordered -> provisioning -> running (or error); `discontinued` once a discontinue is
        accepted or Verda ended it. Its nodes show the same."""
        if cluster.stopped_billing is not None:
            return "discontinued"
        progress = self.progress(cluster)
        if cluster.fail_after_accept and progress >= 0.5:
            return "error"
        if progress < 0.2:
            return "ordered"
        return "provisioning" if progress < 1 else "running"

    def discontinue(self, cluster: SimVM) -> None:
        """A discontinue accepted now: the cluster is gone and stops billing; its volumes are
        detached and bill on ("Shared volumes will be detached and should be deleted
        manually", Verda's document of `PUT /v1/clusters`)."""
        self.settle()
        cluster.deleted = self.clock()
        self.detach_volumes(cluster_id=cluster.id)

    def end_vm(self, vm: SimVM) -> None:
        """Verda ends a VM or a cluster by itself: its volumes are left detached, billing (what
        becomes of them is not documented; billing on is the costly guess)."""
        super().end_vm(vm)
        self.detach_volumes(vm_id=vm.id, cluster_id=vm.id)

    def detach_volumes(self, *, vm_id: str | None = None, cluster_id: str | None = None) -> None:
        """Every volume of that VM or cluster still attached is detached."""
        for volume in self.volumes.values():
            if (vm_id is not None and volume.vm_id == vm_id) or (
                cluster_id is not None and volume.cluster_id == cluster_id
            ):
                volume.detach()

    def describe_cluster(self, cluster: SimVM) -> dict[str, Any]:
        """A cluster for the control API (`GET /_sim/clusters`), as charged so far."""
        return {
            "id": cluster.id,
            "name": cluster.name,
            "cluster_type": cluster.entry.sku,
            "region": cluster.entry.region,
            "status": self.cluster_status(cluster),
            "nodes": cluster.entry.nodes,
            "gpus_per_node": cluster.entry.gpus_per_node,
            "ip": cluster.ip,
            "worker_nodes": [n["id"] for n in cluster.details["worker_nodes"]],
            "shared_volume_size": cluster.details.get("shared_volume_size"),
            "shared_volume_ids": cluster.details.get("shared_volume_ids", []),
            "created_at": cluster.created_at,
            "price_per_hour": str(cluster.hourly_price),
            "charged": str(cluster.charged),
        }
