"""Public identifiers: a type prefix plus a time-ordered, random, lower-case token."""

import os
import threading
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case
_lock = threading.Lock()
_last_ms = 0
_last_random = 0


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, index = divmod(value, 32)
        chars.append(_ALPHABET[index])
    return "".join(reversed(chars))


def new_id(prefix: str) -> str:
    """A new id such as `ord_01jd3x...`: sorts by creation time, strictly within this process.

    The layout is a ULID (48-bit millisecond time + 80 random bits) in lower case, so ids double
    as a stable newest-first ordering and as VM-name material (no `_` after the prefix).
    """
    global _last_ms, _last_random
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms <= _last_ms:
            now_ms = _last_ms
            _last_random += 1
        else:
            _last_random = int.from_bytes(os.urandom(10), "big") >> 1
        _last_ms = now_ms
        token = _encode(now_ms, 10) + _encode(_last_random, 16)
    return f"{prefix}_{token}"
