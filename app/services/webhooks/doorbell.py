"""Wakes this process's webhook dispatchers when a commit has written events for them."""

import asyncio
import threading

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

_lock = threading.Lock()
_listeners: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Event]] = {}
_RINGS_KEY = "rings_webhook_doorbell"


def listen(wake: asyncio.Event) -> None:
    """Set `wake` (from its own event loop) whenever the bell rings."""
    with _lock:
        _listeners[id(wake)] = (asyncio.get_running_loop(), wake)


def stop_listening(wake: asyncio.Event) -> None:
    """Undo `listen`."""
    with _lock:
        _listeners.pop(id(wake), None)


def ring() -> None:
    """Wake every listening dispatcher; safe from any thread."""
    with _lock:
        listeners = list(_listeners.values())
    for loop, wake in listeners:
        if not loop.is_closed():
            loop.call_soon_threadsafe(wake.set)


def _ring_on_commit(_session: Session) -> None:
    ring()


def ring_after_commit(session: AsyncSession) -> None:
    """Ring once this session commits (never if it rolls back)."""
    sync_session = session.sync_session
    if not sync_session.info.get(_RINGS_KEY):
        sync_session.info[_RINGS_KEY] = True
        event.listen(sync_session, "after_commit", _ring_on_commit)
