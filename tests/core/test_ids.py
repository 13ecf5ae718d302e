"""Public ids sort by creation and fit in a provider VM name."""

import re

from app.core.ids import new_id


def test_ids_have_the_prefix_and_a_lower_case_token() -> None:
    assert re.fullmatch(r"ord_[0-9a-z]{26}", new_id("ord"))


def test_ids_made_in_a_row_sort_in_creation_order() -> None:
    ids = [new_id("ord") for _ in range(2000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
