"""The streams open in a process: a cap per account, and waking only the accounts with news."""

import pytest

from app.stream.hub import Hub, TooManyStreams


def test_an_account_may_open_streams_up_to_the_cap_and_one_more_once_one_closes() -> None:
    hub = Hub(per_account=2)
    first, _second = hub.listen("acc_a"), hub.listen("acc_a")
    with pytest.raises(TooManyStreams):
        hub.listen("acc_a")
    assert hub.listen("acc_b").account_id == "acc_b"  # the cap is per account
    hub.stop_listening(first)
    hub.stop_listening(first)  # again is harmless
    assert hub.listen("acc_a").account_id == "acc_a"
    assert hub.open_streams("acc_a") == 2


def test_news_wakes_only_the_streams_of_its_accounts() -> None:
    hub = Hub(per_account=5)
    ada_1, ada_2, bob = hub.listen("acc_ada"), hub.listen("acc_ada"), hub.listen("acc_bob")
    hub.wake(["acc_ada", "acc_nobody"])
    assert ada_1.wake.is_set() and ada_2.wake.is_set()
    assert not bob.wake.is_set()
    hub.wake_all()
    assert bob.wake.is_set()
