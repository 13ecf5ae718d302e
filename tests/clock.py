"""Clocks a test moves by hand, for the parts that take one: time passes only when told to."""

from datetime import datetime, timedelta

from app.core.clock import utcnow

# The step a test takes to be just before or just past a deadline: a power of two (about a
# microsecond), so that clock sums of whole and binary-fraction seconds stay exact floats.
TICK = 2.0**-20


class FakeClock:
    """Monotonic seconds (like `time.monotonic`) that stand still until `advance` (or a write
    to `now`): for the parts that take a clock callable, a simulator's `clock` among them."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass."""
        assert seconds >= 0, "a monotonic clock does not go back"
        self.now += seconds


class FakeWallClock:
    """Timezone-aware UTC (like `utcnow`) that stands still until `advance` or `set`."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = utcnow() if start is None else start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass."""
        self.now += timedelta(seconds=seconds)

    def set(self, moment: datetime) -> None:
        """Jump to `moment` (e.g. a time a database row was written at)."""
        self.now = moment
