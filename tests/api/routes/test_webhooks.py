"""The webhook endpoints API: register, read, change, rotate, remove; refused URLs are 422s."""

from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.settings import Settings
from app.storage.models import WebhookEndpoint
from tests.dns import fake_dns
from tests.factories import AccountHandle, create_account

PUBLIC_URL = "https://203.0.114.9/hooks/autoprovision"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Live-mode rules for webhook URLs: public https only."""
    return settings.model_copy(update={"webhook_allow_private": False})


async def register(
    client: httpx.AsyncClient, account: AccountHandle, **body: Any
) -> httpx.Response:
    return await client.post(
        "/v1/webhook-endpoints", json={"url": PUBLIC_URL, **body}, headers=account.headers
    )


class TestRegister:
    async def test_the_secret_is_shown_once_and_never_again(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        created = await register(client, account, description="pager")
        assert created.status_code == 201, created.text
        body = created.json()
        assert body["id"].startswith("whe_") and body["secret"].startswith("whsec_")
        assert (body["url"], body["events"], body["enabled"]) == (PUBLIC_URL, None, True)
        assert body["description"] == "pager"
        shown = await client.get(f"/v1/webhook-endpoints/{body['id']}", headers=account.headers)
        listed = await client.get("/v1/webhook-endpoints", headers=account.headers)
        assert "secret" not in shown.json()
        assert [e["id"] for e in listed.json()["data"]] == [body["id"]]
        assert body["secret"] not in shown.text + listed.text

    async def test_the_secret_is_stored_encrypted(
        self, client: httpx.AsyncClient, engine: AsyncEngine
    ) -> None:
        account = await create_account(client)
        secret = (await register(client, account)).json()["secret"]
        async with engine.connect() as connection:
            stored = (await connection.execute(select(WebhookEndpoint.secret))).scalar_one()
        assert secret not in stored and secret.removeprefix("whsec_") not in stored

    async def test_chosen_event_types_are_kept_and_unknown_ones_refused(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        chosen = await register(client, account, events=["order.running", "order.running"])
        assert chosen.json()["events"] == ["order.running"]
        unknown = await register(client, account, events=["order.exploded"])
        assert unknown.status_code == 422
        assert unknown.json()["error"]["details"][0]["field"] == "events.0"
        empty = await register(client, account, events=[])
        assert empty.status_code == 422

    async def test_a_format_is_kept_changed_and_checked(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        default = (await register(client, account)).json()
        assert default["format"] == "standard"
        slack = await register(client, account, format="slack")
        assert slack.status_code == 201 and slack.json()["format"] == "slack"
        path = f"/v1/webhook-endpoints/{slack.json()['id']}"
        changed = await client.patch(path, json={"format": "discord"}, headers=account.headers)
        assert changed.json()["format"] == "discord"
        for bad in ("teams", None, 3):
            refused = await client.patch(path, json={"format": bad}, headers=account.headers)
            assert refused.status_code == 422, refused.text
            assert refused.json()["error"]["details"][0]["field"] == "format"
        unknown = await register(client, account, format="msteams")
        assert unknown.status_code == 422
        assert unknown.json()["error"]["details"][0]["field"] == "format"
        shown = await client.get(path, headers=account.headers)
        assert shown.json()["format"] == "discord"  # the refused changes changed nothing

    @pytest.mark.parametrize(
        "url",
        [
            "https://127.0.0.1/hook",
            "https://10.0.0.8/hook",
            "https://169.254.169.254/latest/meta-data/",
            "https://[::1]/hook",
            "https://[::ffff:127.0.0.1]/hook",
            "https://localhost/hook",
            "http://203.0.114.9/hook",
            "https://[::127.0.0.1]/hook",
            "https://[::7f00:1]/hook",
            "https://127.0.0.1./hook",
            "https://localhost./hook",
            "https://203.0.114.9:0/hook",
            "https://203.0.114.9:99999/hook",
            "https://hooks example.com/hook",
            "https://hooks%00.example.com/hook",
            "https://hooks_1.example.com/hook",
        ],
    )
    async def test_urls_into_private_networks_are_a_422_on_the_url_field(
        self, client: httpx.AsyncClient, url: str
    ) -> None:
        account = await create_account(client)
        refused = await register(client, account, url=url)
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["code"] == "validation_error"
        assert error["details"][0]["field"] == "url"
        listed = await client.get("/v1/webhook-endpoints", headers=account.headers)
        assert listed.json()["data"] == []

    async def test_a_unicode_host_name_is_accepted_and_looked_up_idna_encoded(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        with fake_dns({"xn--bcher-kva.example": "203.0.114.9"}) as asked:
            created = await register(client, account, url="https://b\u00fccher.example/hook")
        assert created.status_code == 201, created.text
        assert created.json()["url"] == "https://b\u00fccher.example/hook"
        assert asked == ["xn--bcher-kva.example"]

    async def test_a_name_that_does_not_resolve_yet_is_accepted(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        created = await register(client, account, url="https://hooks.not-yet.invalid/x")
        assert created.status_code == 201  # every delivery checks the address again

    async def test_another_accounts_endpoint_is_not_found(self, client: httpx.AsyncClient) -> None:
        owner, other = await create_account(client, "owner"), await create_account(client, "other")
        endpoint_id = (await register(client, owner)).json()["id"]
        for method, path in [
            ("GET", f"/v1/webhook-endpoints/{endpoint_id}"),
            ("PATCH", f"/v1/webhook-endpoints/{endpoint_id}"),
            ("DELETE", f"/v1/webhook-endpoints/{endpoint_id}"),
            ("POST", f"/v1/webhook-endpoints/{endpoint_id}/rotate-secret"),
            ("GET", f"/v1/webhook-endpoints/{endpoint_id}/deliveries"),
        ]:
            answer = await client.request(method, path, json={}, headers=other.headers)
            assert answer.status_code == 404, (method, path, answer.text)

    async def test_without_a_key_it_is_401(self, client: httpx.AsyncClient) -> None:
        answer = await client.post("/v1/webhook-endpoints", json={"url": PUBLIC_URL})
        assert answer.status_code == 401


class TestChange:
    async def test_patch_changes_only_what_is_sent(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        created = (await register(client, account, description="one")).json()
        path = f"/v1/webhook-endpoints/{created['id']}"
        changed = await client.patch(
            path, json={"events": ["order.deployed"], "enabled": False}, headers=account.headers
        )
        assert changed.status_code == 200, changed.text
        body = changed.json()
        assert (body["events"], body["enabled"], body["description"]) == (
            ["order.deployed"],
            False,
            "one",
        )
        assert body["disabled_reason"] == "disabled by you"
        back = await client.patch(
            path, json={"enabled": True, "events": None}, headers=account.headers
        )
        assert (back.json()["enabled"], back.json()["events"]) == (True, None)
        assert back.json()["disabled_reason"] is None

    async def test_a_new_url_is_checked_like_a_first_one(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        created = (await register(client, account)).json()
        path = f"/v1/webhook-endpoints/{created['id']}"
        refused = await client.patch(
            path, json={"url": "https://169.254.169.254/"}, headers=account.headers
        )
        assert refused.status_code == 422
        assert (await client.get(path, headers=account.headers)).json()["url"] == PUBLIC_URL

    @pytest.mark.parametrize(
        "url",
        ["https://[::127.0.0.1]/", "https://127.0.0.1./", "https://203.0.114.9:0/", "https://a b/"],
    )
    async def test_a_new_url_gets_every_check_of_a_first_one(
        self, client: httpx.AsyncClient, url: str
    ) -> None:
        account = await create_account(client)
        created = (await register(client, account)).json()
        path = f"/v1/webhook-endpoints/{created['id']}"
        refused = await client.patch(path, json={"url": url}, headers=account.headers)
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["details"][0]["field"] == "url"
        assert (await client.get(path, headers=account.headers)).json()["url"] == PUBLIC_URL

    async def test_rotation_shows_a_new_secret_and_keeps_the_old_for_a_day(
        self, client: httpx.AsyncClient
    ) -> None:
        account = await create_account(client)
        created = (await register(client, account)).json()
        rotated = await client.post(
            f"/v1/webhook-endpoints/{created['id']}/rotate-secret", headers=account.headers
        )
        assert rotated.status_code == 200
        assert rotated.json()["secret"] != created["secret"]
        assert rotated.json()["previous_secret_expires_at"] is not None

    async def test_delete_removes_it(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        created = (await register(client, account)).json()
        path = f"/v1/webhook-endpoints/{created['id']}"
        assert (await client.delete(path, headers=account.headers)).status_code == 204
        assert (await client.get(path, headers=account.headers)).status_code == 404

    async def test_redelivering_an_unknown_delivery_is_404(self, client: httpx.AsyncClient) -> None:
        account = await create_account(client)
        answer = await client.post(
            "/v1/webhook-deliveries/whd_01jd3x0000000000000000000/redeliver",
            headers=account.headers,
        )
        assert answer.status_code == 404


class TestWithPrivateReceiversAllowed:
    """Demo mode's rules: loopback receivers are fine, but not this service or its simulators."""

    @pytest.fixture
    def settings(self, settings: Settings) -> Settings:
        return settings.model_copy(update={"webhook_allow_private": True})

    async def test_the_services_ports_and_the_simulators_api_are_a_422(
        self, client: httpx.AsyncClient, settings: Settings
    ) -> None:
        account = await create_account(client)
        for url in (
            f"http://127.0.0.1:{settings.sim_port}/hook",
            f"http://localhost:{settings.port}/v1/orders",
            "http://127.0.0.1:9/_sim/reset",
            "http://127.0.0.1:9/hook/..%2F_SIM/reset",
        ):
            refused = await register(client, account, url=url)
            assert refused.status_code == 422, (url, refused.text)
            error = refused.json()["error"]
            assert (error["code"], error["details"][0]["field"]) == ("validation_error", "url")
        created = await register(client, account, url="http://127.0.0.1:9/hook")
        assert created.status_code == 201, created.text  # control: another local port is fine
        changed = await client.patch(
            f"/v1/webhook-endpoints/{created.json()['id']}",
            json={"url": f"http://127.0.0.1:{settings.sim_port}/_sim/reset"},
            headers=account.headers,
        )
        assert changed.status_code == 422, changed.text
        listed = await client.get("/v1/webhook-endpoints", headers=account.headers)
        assert [e["url"] for e in listed.json()["data"]] == ["http://127.0.0.1:9/hook"]
