"""Verda's startup scripts (`/v1/scripts`): one made for each create that carries a script,
named after the VM, named by its id in the create, and deleted once the VM is gone.

Verda keeps at most 100 scripts a project, so none may outlive its VM: the ids this adapter
made (or last listed) are kept by name, and the reconciler lists what the account holds, so a
script whose delete failed, or was never sent (the process stopped), is deleted later.
Shapes follow the official SDK (`verda/startup_scripts`): POST answers the bare id as text,
GET answers a list of `{"id", "name", "script"}`.
"""

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from app.providers.base import Rejected, Unavailable
from app.providers.verda import parse
from app.providers.verda.client import VerdaClient
from app.providers.verda.parse import PROVIDER

PATH = "/scripts"
# `GET /scripts` is paged (10 a page by default, newest first; 100 at most): a project holds at
# most 100 scripts by default; ten pages of 100 leave room for a raised quota.
PAGE_SIZE = 100
MAX_PAGES = 10


@dataclass(frozen=True)
class Script:
    """One startup script on the account."""

    id: str
    name: str
    script: str


def scripts_of(body: Any) -> list[Script]:
    """`GET /scripts` as scripts; entries without a string id, name and script left out."""
    if not isinstance(body, list):
        raise Unavailable(PROVIDER, f"{PATH} did not answer a list")
    return [
        Script(item["id"], item["name"], item["script"])
        for item in body
        if isinstance(item, dict)
        and all(isinstance(item.get(k), str) for k in ("id", "name", "script"))
    ]


class StartupScripts:
    """Makes, finds and deletes the scripts of our VMs through the adapter's `VerdaClient`."""

    def __init__(self, api: VerdaClient) -> None:
        self._api = api
        self._ids: dict[str, set[str]] = {}  # script name (its VM's name) -> ids we know of

    async def make(self, name: str, script: str) -> str:
        """The id of a script named `name` holding `script`: made now, or the one an earlier
        try made if Verda refuses a second. Nothing of the create is sent before this, so any
        failure is `Unavailable` (or the client's rate and auth outcomes): the order waits."""
        try:
            response = await self._api.request("POST", PATH, json={"name": name, "script": script})
            if not response.is_success:
                self._api.read(response)  # the typed outcome of the refusal
            made = parse.created_id(response.text)
            if made is None:
                raise Unavailable(PROVIDER, "startup script made without an id in the answer")
        except Rejected as refused:
            same = [s for s in await self.listed() if s.name == name and s.script == script]
            if not same:
                raise Unavailable(
                    PROVIDER, f"startup script refused ({refused.message})"
                ) from refused
            made = same[0].id
        self._ids.setdefault(name, set()).add(made)
        return made

    async def listed(self) -> list[Script]:
        """Every script on the account, as Verda lists them now (and known by name after):
        every page, oldest first, so that a script made while paging moves nothing forward."""
        found: list[Script] = []
        for page in range(1, MAX_PAGES + 1):
            params = {"page": page, "pageSize": PAGE_SIZE, "orderDirection": "asc"}
            listed = scripts_of(self._api.read(await self._api.request("GET", PATH, params=params)))
            found += listed
            if len(listed) < PAGE_SIZE:
                break
        for item in found:  # added to, not replaced: a script made meanwhile stays known
            self._ids.setdefault(item.name, set()).add(item.id)
        return found

    async def delete(self, name: str) -> None:
        """Delete every script named `name` that was made or listed here (a script of that
        name made by another process waits for the next listing); gone already is fine."""
        for script_id in sorted(self._ids.get(name, ())):
            response = await self._api.request("DELETE", f"{PATH}/{quote(script_id, safe='')}")
            if response.status_code != 404 and not response.is_success:
                self._api.read(response)
            self._ids.get(name, set()).discard(script_id)
        self._ids.pop(name, None)
