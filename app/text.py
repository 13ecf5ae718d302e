"""The one rule for text a request stores or looks up with: no control characters.

PostgreSQL cannot store NUL in text at all (SQLite can), and the other control characters have
no place in a name or a note: they hide or rewrite text in logs and terminals. Single-line text
refuses every control character: C0 (U+0000-U+001F), DEL and C1 (U+007F-U+009F). Multi-line
text allows tab, line feed, and carriage return as the start of a CRLF line break.
"""

import re

from pydantic import AfterValidator

_SINGLE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MULTI_LINE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")


def check_text(value: str, *, multiline: bool = False) -> str:
    """`value` as it is if it has no control characters (multi-line: but tabs and line breaks)."""
    if multiline and _MULTI_LINE.search(value):
        raise ValueError(
            "must not contain control characters such as NUL (tabs and line breaks are fine)"
        )
    if not multiline and _SINGLE_LINE.search(value):
        raise ValueError("must not contain control characters such as NUL, tabs or line breaks")
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
