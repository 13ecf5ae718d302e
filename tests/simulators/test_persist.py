"""The simulators' state in a file: what is kept, and a file from before a reboot not read."""

import time
from pathlib import Path

import pytest

from app.simulators import persist
from app.simulators.app import create_simulator_app


def test_machines_stock_and_balance_come_back_in_new_simulators(tmp_path: Path) -> None:
    first = create_simulator_app().state.simulators
    verda = first["verda"]
    entry = next(iter(verda.catalog.values()))
    verda.stock[entry.key] = 3
    vm = verda.new_vm("vm-kept", entry, name="ap-kept-1", tags=[])
    verda.balance = verda.balance - 10
    persist.save(first, tmp_path / "sims")

    again = create_simulator_app().state.simulators
    assert "vm-kept" not in again["verda"].vms  # control: new simulators start empty
    assert persist.load(again, tmp_path / "sims")
    kept = again["verda"]
    assert kept.vms["vm-kept"].name == "ap-kept-1" and kept.vms["vm-kept"].ip == vm.ip
    assert kept.stock[entry.key] == 3
    assert kept.wallet.balance == verda.wallet.balance


def test_a_file_from_before_a_reboot_or_cut_short_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sims = create_simulator_app().state.simulators
    entry = next(iter(sims["verda"].catalog.values()))
    sims["verda"].new_vm("vm-old", entry, name=None, tags=[])
    persist.save(sims, tmp_path / "sims")
    booted = time.monotonic() - 3600  # the monotonic clock started again an hour ago
    monkeypatch.setattr("app.simulators.persist.time.monotonic", lambda: booted)
    fresh = create_simulator_app().state.simulators
    assert not persist.load(fresh, tmp_path / "sims")
    assert fresh["verda"].vms == {}
    monkeypatch.undo()
    (tmp_path / "cut").write_bytes((tmp_path / "sims").read_bytes()[:100])
    assert not persist.load(fresh, tmp_path / "cut")
    assert persist.load(fresh, tmp_path / "sims")  # control: the same file, same boot
    assert "vm-old" in fresh["verda"].vms
