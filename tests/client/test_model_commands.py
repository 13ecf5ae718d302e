"""`autoprovision models` and `models fit`, against a running service: the catalogue, the
shapes that hold a model, and a model the service does not know (exit 2, its message)."""

from tests.client.cli import Account, Autoprovision


def test_models_lists_the_catalogue(autoprovision: Autoprovision, account: Account) -> None:
    ran = autoprovision("models")
    assert ran.code == 0, ran.err
    (row,) = [line for line in ran.lines() if line.startswith("moonshotai/Kimi-K3 ")]
    assert "Kimi K3" in row and "1560.94" in row and "MXFP4" in row and "1,048,576" in row
    as_json = autoprovision("models", "--json")
    assert {m["id"] for m in as_json.json()["data"]} >= {"moonshotai/Kimi-K2.7-Code"}


def test_models_fit_shows_the_shapes_that_hold_it(
    autoprovision: Autoprovision, account: Account
) -> None:
    ran = autoprovision("models", "fit", "moonshotai/Kimi-K3")
    assert ran.code == 0, ran.err
    assert ran.out.startswith("Kimi K3 (moonshotai/Kimi-K3): 1560.94 GB; cache room = 92 %")
    (b300,) = [line for line in ran.lines() if line.startswith("8x B300 ")]
    assert "371.06" in b300 and "yes" in b300 and "1561" in b300
    (h200,) = [line for line in ran.lines() if line.startswith("2 x 8x H200 ")]
    assert "514.58" in h200 and "verda, hyperstack" in h200
    assert not [line for line in ran.lines() if line.startswith("8x H200 ")]
    every = autoprovision("models", "fit", "moonshotai/Kimi-K3", "--all")
    (h200_one,) = [line for line in every.lines() if line.startswith("8x H200 ")]
    assert "-523.18" in h200_one and " no " in h200_one  # control: shown with --all
    tight = autoprovision("models", "fit", "moonshotai/Kimi-K3", "--min-cache-gb", "400")
    assert not [line for line in tight.lines() if line.startswith("8x B300 ")]
    by_name = autoprovision("models", "fit", "Kimi K3")  # as people write it
    assert by_name.code == 0 and by_name.out == ran.out


def test_an_unknown_model_is_refused_with_its_message(
    autoprovision: Autoprovision, account: Account
) -> None:
    ran = autoprovision("models", "fit", "acme/Nothing")
    assert ran.code == 2, ran.err  # bad input, as any 4xx
    assert "no model 'acme/Nothing'" in ran.err and ran.out == ""


def test_orders_place_by_model_sends_the_model_and_shows_what_it_expanded_to(
    autoprovision: Autoprovision, account: Account
) -> None:
    ran = autoprovision(
        "orders", "place", "--model", "moonshotai/Kimi-K3", "-p", "verda", "--max-price", "70",
        "--min-cache-gb", "200",
    )  # fmt: skip
    assert ran.code == 0, ran.err
    (order,) = account.orders()
    assert order["model"] == "moonshotai/Kimi-K3"
    assert [(a["gpu_model"], a["nodes"]) for a in order["alternatives"]] == [
        ("B300", 1),
        ("B200", 2),
        ("H200", 2),
    ]
    assert "8x B300 on verda, up to $70.00/h or 2 x 8x B200 on verda" in ran.out


def test_a_machine_and_a_model_together_or_neither_is_refused(
    autoprovision: Autoprovision, account: Account
) -> None:
    both = autoprovision(
        "orders", "place", "--model", "moonshotai/Kimi-K3", "-g", "h200", "-p", "verda",
        "--max-price", "70",
    )  # fmt: skip
    assert both.code == 2 and "not both" in both.err, both.err
    neither = autoprovision("orders", "place", "-p", "verda", "--max-price", "70")
    assert neither.code == 2 and "missing --gpu-model" in neither.err, neither.err
    assert account.orders() == []


def test_orders_place_by_model_with_serve_sends_the_engine(
    autoprovision: Autoprovision, account: Account
) -> None:
    ran = autoprovision(
        "orders", "place", "--model", "moonshotai/Kimi-K3", "--serve", "sglang", "-p", "verda",
        "--max-price", "70", "--json",
    )  # fmt: skip
    assert ran.code == 0, ran.err
    assert ran.json()["serve_engine"] == "sglang"
    assert ran.json()["startup_script_bytes"] > 0
    without_model = autoprovision(
        "orders", "place", "-g", "h200", "-n", "8", "-p", "verda", "--max-price", "70",
        "--serve", "vllm",
    )  # fmt: skip
    assert without_model.code == 2 and "is for orders by --model" in without_model.err
