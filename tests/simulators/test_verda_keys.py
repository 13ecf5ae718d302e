"""The simulated Verda's SSH keys and startup scripts over raw HTTP (the SDK's calls are in
tests/contract/test_verda_sdk.py; the images in test_verda_images.py): what a create refers to
by id, and how it refuses ids it does not know."""

import uuid
from typing import Any

import httpx
import pytest

from app.simulators.verda import VerdaSimulator, build_app
from tests.fixtures.simulators import in_process

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHh0ZXN0a2V5 me@laptop"
SCRIPT = "#!/bin/bash\necho hello > /root/hello\n"
B300 = ("8B300.240V", "FIN-03")
CUDA_13 = "2404f580-1300-1111-82b3-f199fb9b701b"


sim, api = in_process(VerdaSimulator, build_app)


@pytest.fixture
async def client(api: httpx.AsyncClient) -> httpx.AsyncClient:
    """The simulated Verda's API, with a bearer token."""
    body = {"grant_type": "client_credentials", "client_id": "sim-client"}
    token = await api.post("/v1/oauth2/token", json={**body, "client_secret": "sim-secret"})
    api.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
    return api


async def add_key(client: httpx.AsyncClient, name: str = "laptop") -> str:
    made = await client.post("/v1/sshkeys", json={"name": name, "key": KEY})
    assert made.status_code == 201
    return made.text


async def add_script(client: httpx.AsyncClient, name: str = "boot") -> str:
    made = await client.post("/v1/scripts", json={"name": name, "script": SCRIPT})
    assert made.status_code == 201 and made.headers["content-type"].startswith("text/plain")
    assert str(uuid.UUID(made.text)) == made.text
    return made.text


async def create(client: httpx.AsyncClient, **overrides: Any) -> httpx.Response:
    await client.put("/_sim/stock", json={"sku": B300[0], "region": B300[1], "quantity": 1})
    body: dict[str, Any] = {"instance_type": B300[0], "image": CUDA_13, "hostname": "ap-1"}
    body |= {"location_code": B300[1], "startup_script_id": None, **overrides}
    return await client.post("/v1/instances", json=body)


def refused(response: httpx.Response, status: int, message: str) -> bool:
    codes = {400: "invalid_request", 404: "not_found"}
    return response.status_code == status and response.json() == {
        "code": codes[status],
        "message": message,
    }


class TestSSHKeyDelete:
    @pytest.mark.parametrize("path", ["/v1/sshkeys", "/v1/ssh-keys"])
    async def test_the_listed_keys_are_deleted(self, client: httpx.AsyncClient, path: str) -> None:
        first, second, kept = [await add_key(client, name) for name in ("a", "b", "c")]
        gone = await client.request("DELETE", path, json={"keys": [first, second]})
        assert gone.status_code == 200
        assert [k["id"] for k in (await client.get(path)).json()] == [kept]
        assert (await client.delete(f"{path}/{kept}")).status_code == 200
        assert (await client.get(path)).json() == []

    async def test_an_unknown_key_is_verdas_404_and_nothing_is_deleted(
        self, client: httpx.AsyncClient
    ) -> None:
        key_id = await add_key(client)
        body = {"keys": [key_id, str(uuid.uuid4())]}
        answer = await client.request("DELETE", "/v1/sshkeys", json=body)
        assert refused(answer, 404, "SSH key not found")
        assert refused(await client.delete(f"/v1/sshkeys/{uuid.uuid4()}"), 404, "SSH key not found")
        assert [k["id"] for k in (await client.get("/v1/sshkeys")).json()] == [key_id]
        empty = await client.request("DELETE", "/v1/sshkeys", json={"keys": []})
        assert empty.status_code == 400 and empty.json()["code"] == "invalid_request"


class TestStartupScripts:
    async def test_create_list_get_and_delete(self, client: httpx.AsyncClient) -> None:
        first, second, third = [await add_script(client, name) for name in ("a", "b", "c")]
        listed = (await client.get("/v1/scripts")).json()
        assert [(s["id"], s["name"], s["script"]) for s in listed] == [  # newest first
            (third, "c", SCRIPT),
            (second, "b", SCRIPT),
            (first, "a", SCRIPT),
        ]
        one = (await client.get(f"/v1/scripts/{second}")).json()
        assert [s["id"] for s in one] == [second]  # a list of one, as the SDK reads it
        gone = await client.request("DELETE", "/v1/scripts", json={"scripts": [first, second]})
        assert gone.status_code == 200
        assert (await client.delete(f"/v1/scripts/{third}")).status_code == 200
        assert (await client.get("/v1/scripts")).json() == []

    async def test_unknown_ids_and_empty_fields_are_refused(
        self, client: httpx.AsyncClient
    ) -> None:
        kept = await add_script(client)
        missing = str(uuid.uuid4())
        assert refused(await client.get(f"/v1/scripts/{missing}"), 404, "Startup script not found")
        body = {"scripts": [kept, missing]}
        answer = await client.request("DELETE", "/v1/scripts", json=body)
        assert refused(answer, 404, "Startup script not found")
        assert [s["id"] for s in (await client.get("/v1/scripts")).json()] == [kept]
        for bad in ({"name": "", "script": SCRIPT}, {"name": "x"}, {"script": SCRIPT}):
            made = await client.post("/v1/scripts", json=bad)
            assert made.status_code == 400 and made.json()["code"] == "invalid_request"

    async def test_scripts_need_a_token_and_a_reset_forgets_them(
        self, client: httpx.AsyncClient, sim: VerdaSimulator
    ) -> None:
        await add_script(client)
        anonymous = await client.get("/v1/scripts", headers={"Authorization": ""})
        assert anonymous.status_code == 401
        await client.post("/_sim/reset")
        assert sim.startup_scripts == {}

    async def test_a_create_takes_a_known_script_and_refuses_an_unknown_one(
        self, client: httpx.AsyncClient, sim: VerdaSimulator
    ) -> None:
        script_id = await add_script(client)
        made = await create(client, startup_script_id=script_id)
        assert made.status_code == 202
        shown = (await client.get(f"/v1/instances/{made.text}")).json()
        assert shown["startup_script_id"] == script_id
        for bad in (str(uuid.uuid4()), 7):
            answer = await create(client, startup_script_id=bad)
            assert refused(answer, 400, "Invalid startup script id")
        assert [c.outcome for c in sim.creates] == ["created", "rejected", "rejected"]
