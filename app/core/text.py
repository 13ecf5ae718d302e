"""The rules for text a request stores or looks up with, and for quoting it back safely.

PostgreSQL cannot store NUL in text at all (SQLite can), and the other control characters have
no place in a name or a note: they hide or rewrite text in logs and terminals. Single-line text
refuses every control character: C0 (U+0000-U+001F), DEL and C1 (U+007F-U+009F). Multi-line
text allows tab, line feed, and carriage return as the start of a CRLF line break. Neither
takes format characters (Unicode category Cf: bidi overrides and isolates, the BOM, zero-width
characters) or lone surrogates, and neither takes text that shows nothing at all: they spoof
what the dashboard and chat messages show.
"""

import re
import unicodedata

from pydantic import AfterValidator

_SINGLE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MULTI_LINE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")


QUOTE_LIMIT = 40
# Letters that render as nothing (Hangul fillers, the braille blank).
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_INVISIBLE_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Mn", "Me", "Cc", "Cf"})


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """A short, safe quote of user input for a message: at most `limit` characters of it,
    every control, format or non-printable character escaped, then an ellipsis if cut."""
    text = str(value)
    head = "".join(_escaped(c) for c in text[:limit])
    return f"'{head}{'...' if len(text) > limit else ''}'"


def _escaped(char: str) -> str:
    if char.isprintable() and char not in "'\\":
        return char
    if char in "'\\":
        return "\\" + char
    return f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"


def _refuse_unseen(value: str) -> None:
    if any(unicodedata.category(c) in ("Cf", "Cs") for c in value):
        raise ValueError(
            "must not contain invisible format characters such as bidi overrides or U+FEFF"
        )
    if value and all(
        c in _BLANK_LETTERS or unicodedata.category(c) in _INVISIBLE_CATEGORIES for c in value
    ):
        raise ValueError("must contain a visible character")


def check_text(value: str, *, multiline: bool = False) -> str:
    """`value` as it is if it has no control or format characters (multi-line: but tabs and
    line breaks) and shows something."""
    if multiline and _MULTI_LINE.search(value):
        raise ValueError(
            "must not contain control characters such as NUL (tabs and line breaks are fine)"
        )
    if not multiline and _SINGLE_LINE.search(value):
        raise ValueError("must not contain control characters such as NUL, tabs or line breaks")
    _refuse_unseen(value)
    return value


def _check_multi_line(value: str) -> str:
    return check_text(value, multiline=True)


# Metadata for request fields and parameters: `Annotated[str, StringConstraints(...), OneLine]`.
# It runs after the string constraints, so whitespace they strip off is no longer there.
OneLine = AfterValidator(check_text)
MultiLine = AfterValidator(_check_multi_line)


def storable(text: str) -> str:
    """Text from outside (a receiver's answer, a provider's error) with every NUL, which
    PostgreSQL cannot store, replaced by U+FFFD: kept as evidence, never a failed write."""
    return text.replace("\x00", "\ufffd")
