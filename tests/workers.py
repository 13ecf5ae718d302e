"""How many pytest-xdist workers `-n auto` starts (`make test` and `make test-fast` ask so)."""

import os
from collections.abc import Mapping

# xdist's own override, honoured as it is without this hook.
WORKERS_ENV = "PYTEST_XDIST_AUTO_NUM_WORKERS"


def auto_workers(cpus: int, environ: Mapping[str, str]) -> int | None:
    """One worker more than there are cores; None (xdist's own count) when `WORKERS_ENV` is
    set. Many tests wait on sockets, a database or the real clock rather than compute, so a
    worker more keeps both cores busy: measured in docs/contributing/testing.md."""
    if environ.get(WORKERS_ENV):
        return None
    return max(cpus, 1) + 1


def usable_cpus() -> int:
    """The cores this process may run on (fewer than the machine's in a container or a CI
    slot that pins it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
