"""The text rule alone: which characters single-line and multi-line text refuse."""

import pytest

from app.text import check_text


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
