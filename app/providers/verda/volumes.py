"""Verda's volumes (`/v1/volumes`), kept and billed apart from instances and clusters: the OS
volume a create makes for each instance (named `<vm name>-os`), and the shared volume a cluster
create makes (`<vm name>-shared`, of its own type `NVMe_Shared_Cluster`).

A delete that does not name an instance's volumes leaves the OS volume in Verda's 96-hour
trash, and discontinuing a cluster only detaches its shared volume ("Shared volumes will be
detached and should be deleted manually", the document of `PUT /v1/clusters`): both would bill
on. So the adapter names every volume in an instance's delete, deletes a cluster's shared volume
once the cluster is gone, and lists ours for the reconciler to delete what is left.
"""

from typing import Any

from app.providers.base import Volume
from app.providers.verda import parse
from app.providers.verda.client import VerdaClient

OS_SUFFIX = "-os"
SHARED_SUFFIX = "-shared"
DETACHED, TRASH = "detached", "trash"


def os_volume_name(vm_name: str) -> str:
    """The name a create gives the OS volume of the VM named `vm_name`."""
    return vm_name + OS_SUFFIX


def shared_volume_name(vm_name: str) -> str:
    """The name a cluster create gives the shared volume of the cluster named `vm_name`."""
    return vm_name + SHARED_SUFFIX


def instance_volume_ids(body: Any) -> list[str]:
    """An instance's OS volume and every other volume it lists, each once."""
    data = parse.as_dict(body)
    found = [data.get("os_volume_id"), *parse.as_list(data.get("volume_ids"))]
    return list(dict.fromkeys(v for v in found if isinstance(v, str) and v))


def cluster_volume_ids(body: Any) -> list[str]:
    """The ids of a cluster's shared volumes."""
    volumes = parse.as_list(parse.as_dict(body).get("shared_volumes"))
    ids = (v.get("id") if isinstance(v, dict) else v for v in volumes)
    return list(dict.fromkeys(v for v in ids if isinstance(v, str) and v))


def owner_of(data: dict[str, Any]) -> str | None:
    """Whose a volume is, if ours: the VM name in its name (`<vm name>-os`, `-shared`), else
    our tag's value."""
    name = data.get("name")
    if isinstance(name, str):
        for suffix in (OS_SUFFIX, SHARED_SUFFIX):
            if name.endswith(suffix) and len(name) > len(suffix):
                return name.removesuffix(suffix)
    for tag in parse.as_list(data.get("tags")):
        if isinstance(tag, dict) and tag.get("key") == parse.TAG_KEY:
            value = tag.get("value")
            return value if isinstance(value, str) and value else None
    return None


def volume(data: Any, *, trashed: bool) -> Volume | None:
    """One of `/volumes` (or `/volumes/trash`) as a `Volume`; None without an id."""
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
        return None
    status = data.get("status")
    return Volume(
        id=data["id"],
        name=parse.nonempty_str(data.get("name")),
        status=TRASH if trashed else (status if isinstance(status, str) else "unknown"),
        owner=owner_of(data),
    )


def gone(body: Any) -> bool:
    """Whether `GET /volumes/{id}` says the volume is deleted for good (None: not known)."""
    if body is None:
        return True
    data = parse.as_dict(body)
    return data.get("is_permanently_deleted") is True


class VerdaVolumes:
    """Lists and deletes our volumes through the adapter's `VerdaClient`."""

    def __init__(self, api: VerdaClient) -> None:
        self._api = api

    async def ours(self) -> list[Volume]:
        """Every volume of ours, in the trash too (the trash bills on, as far as we know)."""
        found = [volume(v, trashed=False) for v in parse.as_list(await self._api.volumes())]
        trash = parse.as_list(await self._api.trashed_volumes())
        found += [volume(v, trashed=True) for v in trash]
        return [v for v in found if v is not None and v.owner is not None]

    async def delete(self, volume_id: str) -> None:
        """Delete for good; gone already is fine."""
        await self._api.delete_volume(volume_id)

    async def left(self, volume_ids: list[str]) -> list[str]:
        """Of `volume_ids`, those Verda still keeps (not deleted for good)."""
        return [v for v in volume_ids if not gone(await self._api.volume(v))]
