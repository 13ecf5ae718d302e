"""Fixed-window rate limits, counted the way the providers document theirs."""

from starlette.requests import Request


class FixedWindowLimiter:
    """Counts requests per key in fixed windows, as the providers document their limits."""

    def __init__(self) -> None:
        self._windows: dict[str, tuple[float, int]] = {}

    def hit(self, key: str, limit: int, window: float, now: float) -> float | None:
        """Count one request; returns seconds until the window resets if it is over the limit."""
        start, count = self._windows.get(key, (now, 0))
        if now - start >= window:
            start, count = now, 0
        count += 1
        self._windows[key] = (start, count)
        if count > limit:
            return max(0.0, window - (now - start))
        return None

    def hit_per_ip(self, request: Request, limit: int, window: float, now: float) -> float | None:
        """`hit` on the window of the request's source IP (how Hyperstack and QuantaCloud count)."""
        ip = request.client.host if request.client else "unknown"
        return self.hit(f"ip:{ip}", limit, window, now)

    def left(self, key: str, limit: int, window: float, now: float) -> tuple[int, float]:
        """(requests left, seconds until the window resets) for `key` now."""
        start, count = self._windows.get(key, (now, 0))
        if now - start >= window:
            return limit, window
        return max(0, limit - count), max(0.0, window - (now - start))

    def clear(self) -> None:
        """Forget every window."""
        self._windows.clear()
