"""The streams open in this process, by account, and waking them when their account has news."""

import asyncio
from collections.abc import Iterable

# Streams are not counted among the requests in flight, so their reads are bounded here
# instead: however many streams an event wakes, they take at most this many database
# connections at once, and the pool stays there for requests and the watcher.
READS_AT_ONCE = 2


class TooManyStreams(Exception):
    """The account already has as many streams open here as it may."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"at most {limit} event streams may be open at once per account")
        self.limit = limit


class Listener:
    """One open stream: set `wake` when its account has an event it may not have read yet."""

    def __init__(self, account_id: str) -> None:
        self.account_id = account_id
        self.wake = asyncio.Event()


class Hub:
    """Streams by account, with a cap per account; the publisher wakes the ones with news."""

    def __init__(self, *, per_account: int, reads_at_once: int = READS_AT_ONCE) -> None:
        self.per_account = per_account
        self._listeners: dict[str, set[Listener]] = {}
        self.reading = asyncio.Semaphore(reads_at_once)  # hold it for a stream's read

    def listen(self, account_id: str) -> Listener:
        """A new listener for the account; raises TooManyStreams past the cap."""
        listeners = self._listeners.setdefault(account_id, set())
        if len(listeners) >= self.per_account:
            raise TooManyStreams(self.per_account)
        listener = Listener(account_id)
        listeners.add(listener)
        return listener

    def stop_listening(self, listener: Listener) -> None:
        """Forget a listener (again is fine)."""
        listeners = self._listeners.get(listener.account_id)
        if listeners is not None:
            listeners.discard(listener)
            if not listeners:
                del self._listeners[listener.account_id]

    def open_streams(self, account_id: str) -> int:
        """How many streams the account has open in this process."""
        return len(self._listeners.get(account_id, ()))

    def wake(self, account_ids: Iterable[str]) -> None:
        """Wake every stream of these accounts."""
        for account_id in account_ids:
            for listener in self._listeners.get(account_id, ()):
                listener.wake.set()

    def wake_all(self) -> None:
        """Wake every stream (they read what is new, if anything)."""
        self.wake(list(self._listeners))
