"""Orders' start-up scripts: what one may be, which providers run one, and how it is sealed at
rest (like webhook secrets: it may hold tokens) and opened again for the create."""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from app.core.errors import ValidationFailed
from app.core.states import OrderEventKind
from app.providers.registry import display_name, offered, script_runners
from app.services.timeline import Line
from app.support.secrets import SecretBox

MAX_BYTES = 32 * 1024  # UTF-8 encoded
WHAT = "the order's start-up script"  # for a seal that does not open


@dataclass(frozen=True)
class Sealed:
    """A script as an order stores it: sealed for the order's row, its SHA-256 and size."""

    sealed: str
    sha256: str  # hex, of the UTF-8 bytes
    size: int  # UTF-8 bytes


def problem(script: str) -> str | None:
    """What is wrong with a start-up script, or None: it must be UTF-8 text of 1 to MAX_BYTES
    bytes, not only blanks, without a NUL character."""
    try:
        size = len(script.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate, which JSON's \ud800 escapes can carry
        return "must be valid UTF-8 text (it holds a lone surrogate)"
    if not script.strip():
        return "must not be empty (leave it out for none)"
    if size > MAX_BYTES:
        return f"must be at most {MAX_BYTES} bytes as UTF-8 ({size} given)"
    if "\0" in script:
        return "must not contain a NUL character"
    return None


def scriptless(providers: Sequence[str]) -> list[str]:
    """Those of `providers` that cannot run a start-up script."""
    runners = script_runners()
    return [str(p) for p in providers if str(p) not in runners]


def check(script: str | None, providers: Sequence[str]) -> list[str]:
    """Of an order's providers, those that cannot run its start-up script (none without one).
    ValidationFailed naming `startup_script` when the script is refused (`refusal`)."""
    if script is None:
        return []
    why = refusal(script, providers)
    if why is not None:
        raise ValidationFailed(
            f"startup_script: {why}", details=[{"field": "startup_script", "message": why}]
        )
    return scriptless(providers)


def refusal(script: str, providers: Sequence[str]) -> str | None:
    """Why an order may not carry `script` at `providers`, or None: a bad script, or no
    provider among them that runs one."""
    bad = problem(script)
    if bad is not None:
        return bad
    unable = scriptless(providers)
    if len(unable) < len(providers):
        return None
    able = [spec.name for spec in offered() if spec.name in script_runners()]
    which = f" ({_names(able, 'or')})" if able else ""
    return (
        f"{_names(unable, 'and')} cannot run a start-up script: accept a provider that can"
        f"{which}, or leave the script out"
    )


def placed_line(order_id: str, unable: Sequence[str], usable: Sequence[str]) -> Line:
    """Said once, when the order is placed: the providers its script keeps it from."""
    return Line(
        order_id,
        OrderEventKind.PROVIDERS_DISABLED,
        f"{_names(unable, 'and')}: cannot run a start-up script; this order deploys only on "
        f"{_names(usable, 'or')}.",
    )


def _names(providers: Sequence[str], last: str) -> str:
    names = [display_name(p) for p in providers]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" {last} " + names[-1]


def seal(box: SecretBox | None, order_id: str, script: str) -> Sealed:
    """The script sealed for the order's row, with its SHA-256 and size."""
    if box is None:
        raise ValueError("an order with a start-up script needs the secret box to seal it")
    encoded = script.encode("utf-8")
    return Sealed(box.seal(order_id, script), hashlib.sha256(encoded).hexdigest(), len(encoded))


def open_sealed(box: SecretBox, order_id: str, sealed: str) -> str:
    """The script sealed for `order_id` (SealedSecretError when the keys cannot open it)."""
    return box.open(order_id, sealed, what=WHAT, owner_kind="order")
