"""The text rule alone: which characters single-line and multi-line text refuse."""

import pytest

from app.core.text import QUOTE_LIMIT, check_text, quote


@pytest.mark.parametrize("char", ["\x00", "\x01", "\x1f", "\x7f", "\x80", "\x9f"])
def test_control_characters_are_refused_in_any_text(char: str) -> None:
    for multiline in (False, True):
        with pytest.raises(ValueError, match="control characters"):
            check_text(f"a{char}b", multiline=multiline)


def test_tabs_and_line_breaks_only_in_multi_line_text() -> None:
    for text in ("a\tb", "a\nb", "a\r\nb"):
        assert check_text(text, multiline=True) == text
        with pytest.raises(ValueError):
            check_text(text)
    with pytest.raises(ValueError):
        check_text("a\rb", multiline=True)  # a lone CR rewrites the line in a terminal


def test_other_text_passes_unchanged() -> None:
    for text in ("Ada Lovelace", "bücher ☃ 東京", "\u00a0spaced\u2003", "emoji 🚀"):
        assert check_text(text) == text


@pytest.mark.parametrize(
    "char", ["\u202e", "\u202a", "\u2066", "\u2069", "\u200e", "\u200f", "\u061c", "\ufeff"]
)
def test_bidi_controls_and_other_format_characters_are_refused(char: str) -> None:
    for multiline in (False, True):
        with pytest.raises(ValueError, match="format characters"):
            check_text(f"invoice{char}gpj.exe", multiline=multiline)


@pytest.mark.parametrize("text", [" ", "\u3164", "\u2800\u2800", "\u0301", "\u3000 \u00a0"])
def test_text_that_shows_nothing_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="visible character"):
        check_text(text)
    assert check_text(f"a{text}") == f"a{text}"  # with something visible, fine


def test_a_quote_is_short_and_escaped() -> None:
    assert quote("ord_123") == "'ord_123'"
    assert quote("a" * 60000) == f"'{'a' * QUOTE_LIMIT}...'"
    assert quote("a\u202eb\nc'd\\") == "'a\\u202eb\\u000ac\\'d\\\\'"
    assert quote("x\U000e0001") == "'x\\U000e0001'"
    # The limit is on the input: escaping never lets more of it through.
    assert quote("\u202e" * 100).count("\\u202e") == QUOTE_LIMIT
