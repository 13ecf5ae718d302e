"""A simulator clock (`ProviderSimulator.clock`) that moves only when a test says so."""


class ManualClock:
    """Seconds that stand still until `advance` (or a write to `now`)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock on."""
        self.now += seconds
