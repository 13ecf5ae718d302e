"""`orders place --image NAME` and what `orders get` shows of it, against a running service."""

import re

from tests.client.cli import Account, Autoprovision

VERDA_B300 = ("-g", "b300", "-n", "8", "-p", "verda", "--max-price", "45.5")
IMAGE = "ubuntu-24.04-cuda-13.0-open-docker"  # one of Verda's images


def test_the_image_is_sent_and_shown(autoprovision: Autoprovision, account: Account) -> None:
    ran = autoprovision("orders", "place", *VERDA_B300, "--image", IMAGE, "--json")
    assert ran.code == 0, ran.err
    order_id = ran.json()["id"]
    (order,) = account.orders()
    assert order["image"] == IMAGE
    assert re.search(rf"Image\s+{IMAGE}", autoprovision("orders", "get", order_id).out)
    # Positive control of the line above: an order naming none shows no image line.
    plain = autoprovision("orders", "place", *VERDA_B300, "--json").json()["id"]
    assert "Image" not in autoprovision("orders", "get", plain).out


def test_an_image_at_a_stock_image_provider_only_is_exit_2_naming_it(
    autoprovision: Autoprovision, account: Account
) -> None:
    quanta = ("-g", "b300", "-n", "8", "-p", "quantacloud", "--max-price", "45.5")
    ran = autoprovision("orders", "place", *quanta, "--image", IMAGE)
    assert ran.code == 2 and "image: QuantaCloud boots one stock image" in ran.err, ran.err
    assert account.orders() == []
