"""Every client command end to end against a running service: what it does, bad input (exit 2,
a clear line), and a service that cannot be reached (exit 3)."""

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from app.cli import main
from tests.client.cli import B300, Account, Autoprovision, place
from tests.fixtures.settings import ADMIN_KEY

SSH_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFkkEa055eQN0BuHueKXxmUstrKN6gSW77TuOls8f542 ada@laptop"
)


class TestPlace:
    def test_every_field_reaches_the_api_and_json_prints_the_order(
        self, autoprovision: Autoprovision, account: Account, tmp_path: Path
    ) -> None:
        key_file = tmp_path / "id_ed25519.pub"
        key_file.write_text(SSH_KEY + "\n")
        expires = (datetime.now(UTC) + timedelta(days=3)).replace(microsecond=0)
        ran = autoprovision(
            "orders", "place", "--gpu-model", "b300", "--gpu-count", "8",
            "--provider", "verda,hyperstack", "--max-price", "46.5",
            "--region", "FIN-01", "-r", "CANADA-1", "--min-disk-gb", "500",
            "--interconnect", "sxm", "--expires-at", expires.isoformat(),
            "--name", "training run 7", "--ssh-public-key-file", str(key_file), "--json",
        )  # fmt: skip
        assert ran.code == 0, ran.err
        order = ran.json()
        assert order["status"] == "waiting" and order["id"].startswith("ord_")
        assert (order["gpu_model"], order["gpu_count"]) == ("B300", 8)
        assert order["providers"] == ["verda", "hyperstack"]
        assert order["max_price_per_hour"] == "46.50"
        assert order["regions"] == ["FIN-01", "CANADA-1"] and order["min_disk_gb"] == 500
        assert order["interconnect"] == "sxm" and order["name"] == "training run 7"
        assert order["ssh_public_key"] == SSH_KEY
        assert datetime.fromisoformat(order["expires_at"]) == expires
        assert [o["id"] for o in account.orders()] == [order["id"]]

    def test_people_get_one_line_and_how_to_follow_it(
        self, autoprovision: Autoprovision, account: Account
    ) -> None:
        ran = autoprovision("orders", "place", *B300)
        assert ran.code == 0, ran.err
        (order,) = account.orders()
        assert f"Placed: {order['id']}, 8x B300 on verda, hyperstack, up to $45.50/h" in ran.out
        assert f"autoprovision watch {order['id']} --until running" in ran.out

    def test_the_same_idempotency_key_places_one_order(
        self, autoprovision: Autoprovision, account: Account
    ) -> None:
        first = place(autoprovision, "--idempotency-key", "run-7")
        again = autoprovision("orders", "place", *B300, "--idempotency-key", "run-7")
        assert again.code == 0 and "Already placed with this idempotency key" in again.out
        assert [o["id"] for o in account.orders()] == [first]
        other = place(autoprovision, "--idempotency-key", "run-8")  # positive control
        assert {o["id"] for o in account.orders()} == {first, other}

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            (("-g", "b301"), "gpu_model: unknown GPU model"),
            (("-n", "0"), "gpu_count: Input should be greater than or equal to 1"),
            (("-p", "nimbus"), "providers.2: Input should be"),
            (("--max-price", "45.555"), "max_price_per_hour: must be an amount like"),
            (("--interconnect", "carrier-pigeon"), "interconnect: Input should be"),
            (("--expires-at", "2020-01-01T00:00:00Z"), "expires_at must be in the future"),
            (("--ssh-public-key", "not a key"), "must be one OpenSSH public key line"),
        ],
    )
    def test_what_the_api_refuses_is_exit_2_with_its_message(
        self,
        autoprovision: Autoprovision,
        account: Account,
        change: tuple[str, str],
        message: str,
    ) -> None:
        ran = autoprovision("orders", "place", *B300, *change)
        assert ran.code == 2
        assert ran.err.startswith("autoprovision: ") and message in ran.err
        assert "(validation_error, HTTP 422)" in ran.err and len(ran.err.splitlines()) == 1
        assert "Traceback" not in ran.err and account.orders() == []

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (("-g", "b300", "-p", "verda", "--max-price", "4"), "missing --gpu-count"),
            ((*B300[:-1], "lots"), "'lots' is not an amount like 46.50"),
            ((*B300[:-1], "NaN"), "'NaN' is not an amount like 46.50"),
            ((*B300, "-n", "eight"), "'--gpu-count' / '-n': Input should be a valid integer"),
            ((*B300, "--idempotency-key", ""), "must be 1 to 255 printable ASCII characters"),
            ((*B300, "--ssh-public-key", SSH_KEY, "--ssh-public-key-file", "k"), "not both"),
        ],
    )
    def test_bad_options_are_exit_2_before_any_request(
        self, autoprovision: Autoprovision, nowhere: str, args: tuple[str, ...], message: str
    ) -> None:
        ran = autoprovision("orders", "place", *args, "--url", nowhere, "--key", "k")
        unboxed = " ".join(re.sub("[\u2500-\u257f]", " ", ran.err).split())  # Typer's box
        assert ran.code == 2 and message in unboxed, ran.err
        assert "Traceback" not in ran.err


class TestList:
    def test_pages_statuses_and_every_page(
        self, autoprovision: Autoprovision, account: Account
    ) -> None:
        placed = [place(autoprovision) for _ in range(3)]
        assert autoprovision("orders", "cancel", placed[0]).code == 0
        first = autoprovision("orders", "list", "--limit", "2", "--json").json()
        assert [o["id"] for o in first["data"]] == placed[:0:-1]
        rest = autoprovision("orders", "list", "--cursor", first["next_cursor"], "--json")
        assert [o["id"] for o in rest.json()["data"]] == [placed[0]]
        every = autoprovision("orders", "list", "--limit", "1", "--all", "--json").json()
        assert [o["id"] for o in every["data"]] == placed[::-1] and every["next_cursor"] is None
        waiting = autoprovision("orders", "list", "--status", "waiting", "--json").json()
        assert [o["id"] for o in waiting["data"]] == placed[:0:-1]

    def test_people_get_a_table_and_the_next_page_command(
        self, autoprovision: Autoprovision, account: Account
    ) -> None:
        placed = [place(autoprovision, "--name", f"run {n}") for n in range(2)]
        ran = autoprovision("orders", "list", "--limit", "1", "--status", "waiting")
        assert ran.code == 0
        (row,) = [line for line in ran.lines() if line.startswith("ord_")]
        assert placed[1] in row and "waiting" in row and "$45.50/h" in row and "run 1" in row
        assert f"orders list --status waiting --cursor {placed[1]}" in ran.out
        assert autoprovision("orders", "list", "--status", "running").out == "No running orders.\n"

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (("--status", "sleeping"), "status: Input should be 'waiting'"),
            (("--limit", "0"), "limit: Input should be greater than or equal to 1"),
            (("--cursor", "nope"), "cursor: String should match pattern"),
        ],
    )
    def test_bad_filters_are_exit_2(
        self, autoprovision: Autoprovision, account: Account, args: tuple[str, ...], message: str
    ) -> None:
        ran = autoprovision("orders", "list", *args)
        assert ran.code == 2 and message in ran.err, ran.err


class TestGetCancelEvents:
    def test_get_shows_the_order(self, autoprovision: Autoprovision, account: Account) -> None:
        order_id = place(autoprovision, "--name", "[bold]run[/bold]")
        ran = autoprovision("orders", "get", order_id)
        assert ran.code == 0
        assert order_id in ran.out and "waiting" in ran.out
        assert "8x B300 on verda, hyperstack, up to $45.50/h incl. fees" in ran.out
        assert "[bold]run[/bold]" in ran.out  # text from the service is never Rich markup
        as_json = autoprovision("orders", "get", order_id, "--json").json()
        assert as_json["id"] == order_id and "estimate" in as_json

    def test_cancel_then_cancel_again_is_refused_with_exit_1(
        self, autoprovision: Autoprovision, account: Account
    ) -> None:
        order_id = place(autoprovision)
        ran = autoprovision("orders", "cancel", order_id)
        assert (ran.code, ran.out) == (0, f"Cancelled {order_id} (cancelled).\n")
        again = autoprovision("orders", "cancel", order_id)
        assert again.code == 1 and again.out == ""
        assert "only a waiting order can be cancelled (order_not_waiting, HTTP 409)" in again.err
        other = place(autoprovision)
        as_json = autoprovision("orders", "cancel", other, "--json").json()
        assert (as_json["id"], as_json["status"]) == (other, "cancelled")

    def test_events_are_the_timeline(self, autoprovision: Autoprovision, account: Account) -> None:
        order_id = place(autoprovision)
        autoprovision("orders", "cancel", order_id)
        ran = autoprovision("orders", "events", order_id)
        assert ran.code == 0
        assert "placed" in ran.out and "Order placed: 8x B300" in ran.out
        assert "Cancelled by you." in ran.out
        kinds = [e["kind"] for e in autoprovision("orders", "events", order_id, "--json").json()]
        assert kinds == ["placed", "cancelled"]

    @pytest.mark.parametrize("command", ["get", "cancel", "events"])
    def test_an_unknown_or_odd_order_id_is_exit_2(
        self, autoprovision: Autoprovision, account: Account, command: str
    ) -> None:
        for order_id in ("ord_00000000000000000000000000", "../account", "a?b#c"):
            ran = autoprovision("orders", command, order_id)
            assert ran.code == 2, (order_id, ran.err)
            assert "(not_found, HTTP 404)" in ran.err

    def test_another_accounts_order_is_not_found(
        self, autoprovision: Autoprovision, account: Account
    ) -> None:
        order_id = place(autoprovision)
        other = httpx.post(
            f"{account.url}/v1/accounts",
            json={"name": "Eve"},
            headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        ).json()["api_key"]
        assert autoprovision("orders", "get", order_id, "--key", other).code == 2
        assert autoprovision("orders", "get", order_id).code == 0  # positive control


class TestAccount:
    def test_balance_for_people_and_scripts(
        self, autoprovision: Autoprovision, account: Account
    ) -> None:
        ran = autoprovision("account")
        assert ran.code == 0
        assert account.id in ran.out and "$100.00" in ran.out and "Available" in ran.out
        assert autoprovision("account", "--json").json()["available"] == "100.00"

    def test_the_ledger_shows_each_movement_with_the_balance_after(
        self, autoprovision: Autoprovision, account: Account
    ) -> None:
        ran = autoprovision("account", "--ledger")
        assert ran.code == 0, ran.err
        (row,) = [line for line in ran.out.splitlines() if "topup" in line]
        assert row.split()[3:6] == ["$100.00", "$100.00", "$0.00"], row  # amount, balance, held
        scripted = autoprovision("account", "--ledger", "--json").json()
        assert scripted["available"] == "100.00"
        (entry,) = scripted["ledger"]
        assert (entry["kind"], entry["amount"], entry["balance_after"]) == (
            "topup",
            "100.00",
            "100.00",
        )
        without = autoprovision("account", "--json").json()  # control: no ledger unless asked
        assert "ledger" not in without and "topup" not in autoprovision("account").out

    def test_top_up_adds_play_money_in_demo_mode(
        self, autoprovision: Autoprovision, account: Account
    ) -> None:
        ran = autoprovision("account", "top-up", "250")
        assert ran.code == 0, ran.err
        assert ran.out.strip() == "Added $250.00: the balance is now $350.00."
        assert autoprovision("account", "--json").json()["balance"] == "350.00"
        too_much = autoprovision("account", "top-up", "5000")
        assert too_much.code == 2 and "at most $1000.00" in too_much.err
        assert autoprovision("account", "top-up", "lots").code == 2

    @pytest.mark.parametrize("limit", ["0", "101"])
    def test_a_ledger_limit_out_of_range_is_exit_2(
        self, autoprovision: Autoprovision, account: Account, limit: str
    ) -> None:
        ran = autoprovision("account", "--ledger", "--limit", limit)
        assert ran.code == 2 and "limit" in ran.err and ran.out == "", ran.err

    def test_options_win_over_the_environment(
        self, autoprovision: Autoprovision, account: Account, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("AUTOPROVISION_API_URL", "http://127.0.0.1:9")
        monkeypatch.setenv("AUTOPROVISION_API_KEY", "ap_live_wrong")
        ran = autoprovision("account", "--url", account.url + "/", "--key", account.key)
        assert ran.code == 0 and "$100.00" in ran.out

    def test_a_wrong_key_is_exit_2_and_never_printed(
        self, autoprovision: Autoprovision, account: Account
    ) -> None:
        wrong = "ap_live_this-is-not-a-key-0123456789"
        ran = autoprovision("account", "--key", wrong)
        assert ran.code == 2
        assert "API key not recognised (unauthorized, HTTP 401)" in ran.err
        assert "AUTOPROVISION_API_KEY" in ran.err
        assert wrong not in ran.err + ran.out and account.key not in ran.err + ran.out

    def test_the_admin_key_is_forbidden_here(
        self, autoprovision: Autoprovision, account: Account
    ) -> None:
        ran = autoprovision("account", "--key", ADMIN_KEY)
        assert ran.code == 2 and "(forbidden, HTTP 403)" in ran.err

    @pytest.mark.parametrize("key", ["", "  ", "ap_live_a b", "ap_live_\u00e9", "ap_live_\nx"])
    def test_no_key_or_one_no_key_has_is_exit_2_before_any_request(
        self, autoprovision: Autoprovision, nowhere: str, key: str
    ) -> None:
        ran = autoprovision("account", "--url", nowhere, "--key", key)
        message = "has characters no API key has" if key.strip() else "no API key: pass --key"
        assert ran.code == 2 and message in ran.err, ran.err
        assert "cannot reach" not in ran.err and (not key.strip() or key not in ran.err)

    @pytest.mark.parametrize("url", ["127.0.0.1:8000", "ftp://127.0.0.1", "http://"])
    def test_a_url_that_is_no_http_address_is_exit_2(
        self, autoprovision: Autoprovision, url: str
    ) -> None:
        ran = autoprovision("account", "--url", url, "--key", "ap_live_k")
        assert ran.code == 2 and "must be an http:// or https:// address" in ran.err


class TestOffers:
    def test_no_offers_yet_says_so(self, autoprovision: Autoprovision, account: Account) -> None:
        ran = autoprovision("offers", "-g", "h100")
        assert ran.code == 0 and "Nothing in stock that matches" in ran.out
        assert autoprovision("offers", "--json").json()["data"] == []

    @pytest.mark.parametrize(
        ("args", "message"),
        [(("-g", "h101"), "gpu_model: unknown GPU model"), (("-p", "nimbus"), "provider:")],
    )
    def test_bad_filters_are_exit_2(
        self, autoprovision: Autoprovision, account: Account, args: tuple[str, ...], message: str
    ) -> None:
        ran = autoprovision("offers", *args)
        assert ran.code == 2 and message in ran.err, ran.err


UNREACHABLE_COMMANDS = [
    ("orders", "place", *B300),
    ("orders", "list"),
    ("orders", "get", "ord_00000000000000000000000000"),
    ("orders", "cancel", "ord_00000000000000000000000000"),
    ("orders", "events", "ord_00000000000000000000000000"),
    ("orders", "terminate", "ord_00000000000000000000000000"),
    ("orders", "terminate", "ord_00000000000000000000000000", "--yes"),
    ("orders", "limits", "ord_00000000000000000000000000", "--max-runtime-hours", "1"),
    ("offers",),
    ("account",),
    ("account", "--ledger"),
    ("watch",),
    ("watch", "ord_00000000000000000000000000", "--until", "running"),
]


@pytest.mark.parametrize("command", UNREACHABLE_COMMANDS, ids=" ".join)
def test_a_service_that_cannot_be_reached_is_exit_3(
    autoprovision: Autoprovision, nowhere: str, command: tuple[str, ...]
) -> None:
    ran = autoprovision(*command, "--url", nowhere, "--key", "ap_live_secret-key-0123456789")
    assert ran.code == 3 and ran.out == "" and len(ran.err.splitlines()) == 1
    expected = f"autoprovision: cannot reach the service at {nowhere}: connection refused"
    assert ran.err.startswith(expected), ran.err
    if command[:2] == ("orders", "place"):  # how to retry without placing twice
        assert re.search(r"again with --idempotency-key [0-9a-f-]{36} and it is done", ran.err)
    assert "secret-key" not in ran.err


def test_help_lists_the_client_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    for line in (
        "orders Place, list, read, cancel and terminate orders",
        "offers What the providers have",
        "account Your balance",
        "watch Print events as they happen",
        "serve Migrate the database",
    ):
        assert line in out
    assert "Exit codes: 0 done, 1 refused or the order failed, 2 bad input, 3 service" in out
    assert main(["orders", "--help"]) == 0
    orders_help = capsys.readouterr().out
    assert all(
        name in orders_help
        for name in ("place", "list", "get", "cancel", "terminate", "limits", "events")
    )
