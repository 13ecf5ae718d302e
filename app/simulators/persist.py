"""The simulators' state kept in a file, so that demo mode carries on after a restart with the
same machines, volumes, balances and stock (the service's database remembers them too).

The file is the service's own, beside its SQLite database, and written the way a database is
(a new file, then renamed over the old one). It is a pickle: it holds the simulators' objects
as they are, and only this process writes it. The simulators' clocks are monotonic (since
the machine booted), so a file written before a reboot is not read: its times would be wrong.
"""

import logging
import os
import pickle
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.simulators.core import ProviderSimulator

log = logging.getLogger(__name__)
# Kept out of the file: the request log (bounded, and only for tests and the control API), a
# test's exchange log, the clock (the process's own) and the generator of the next IPs.
TRANSIENT = frozenset({"requests", "exchange_log", "clock", "_ips"})
# The wall clock and the monotonic one may drift apart this much between two processes of
# one boot; more, and the machine rebooted since the file was written.
REBOOT_DRIFT_SECONDS = 5.0


@dataclass(frozen=True)
class _Saved:
    wall: float
    monotonic: float
    state: dict[str, dict[str, Any]]


def save(simulators: Mapping[str, ProviderSimulator], path: Path) -> None:
    """Write every simulator's state to `path`, replacing what was there in one step."""
    state = {
        name: {k: v for k, v in vars(sim).items() if k not in TRANSIENT}
        for name, sim in simulators.items()
    }
    data = pickle.dumps(_Saved(time.time(), time.monotonic(), state))
    fresh = path.with_name(path.name + ".new")
    fresh.write_bytes(data)
    os.replace(fresh, path)


def load(simulators: Mapping[str, ProviderSimulator], path: Path) -> bool:
    """Put back the state saved in `path` into these simulators; whether there was one to
    put back (none, one from before a reboot, or one that cannot be read: they start afresh)."""
    if not path.exists():
        return False
    try:
        saved = pickle.loads(path.read_bytes())
    except Exception as exc:  # a file cut short or from another version: start afresh
        log.warning("simulator state in %s cannot be read (%s): starting afresh", path, exc)
        return False
    if not isinstance(saved, _Saved):
        log.warning("simulator state in %s is not this version's: starting afresh", path)
        return False
    drift = (time.time() - saved.wall) - (time.monotonic() - saved.monotonic)
    if abs(drift) > REBOOT_DRIFT_SECONDS:
        log.warning("simulator state in %s is from before a reboot: starting afresh", path)
        return False
    for name, sim in simulators.items():
        if name in saved.state:
            vars(sim).update(saved.state[name])
    return True
