"""``api/paging.py``: walking a list with its cursors visits every row once, in order, and ``prev`` goes
back to exactly the page before; a cursor of another listing or any other text is refused."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalar.api import paging
from scalar.api.problems import ApiProblem

LISTING = paging.fingerprint("test", state=None)


def _fetch(rows: list[int], descending: bool) -> paging.Fetch[int]:
    def fetch(key: object, reverse: bool, n: int) -> list[int]:
        down = descending != reverse
        ordered = sorted(rows, reverse=down)
        if key is not None:
            ordered = [r for r in ordered if (r < key if down else r > key)]  # type: ignore[operator]
        return ordered[:n]

    return fetch


@given(
    rows=st.sets(st.integers(0, 10_000), max_size=60),
    limit=st.integers(1, 12),
    descending=st.booleans(),
)
def test_next_visits_every_row_once_and_prev_returns_the_page_before(
    rows: set[int], limit: int, descending: bool
) -> None:
    fetch = _fetch(sorted(rows), descending)
    pages: list[paging.Page[int]] = []
    cursor = None
    while True:
        page = paging.page(fetch, lambda r: r, limit, cursor, LISTING)
        assert len(page.items) <= limit
        pages.append(page)
        if page.next is None:
            break
        cursor = paging.decode(page.next, LISTING)
    walked = [r for p in pages for r in p.items]
    assert walked == sorted(rows, reverse=descending)
    assert pages[0].prev is None
    for before, after in pairwise(pages):
        assert after.prev is not None
        back = paging.page(fetch, lambda r: r, limit, paging.decode(after.prev, LISTING), LISTING)
        assert back.items == before.items


@pytest.mark.parametrize("text", ["", "%%%", "eyJrIjoxfQ", "W10", "e30", "x" * 2000])
def test_anything_but_a_cursor_of_this_listing_is_refused(text: str) -> None:
    if text == "":
        assert paging.decode(text, LISTING) is None
        return
    with pytest.raises(ApiProblem) as raised:
        paging.decode(text, LISTING)
    assert raised.value.status == 422
    assert raised.value.errors[0].field == "after"


def test_a_cursor_names_its_listing() -> None:
    cursor = paging.encode("job-1", False, LISTING)
    assert paging.decode(cursor, LISTING) == paging.Cursor("job-1", False)
    other = paging.fingerprint("test", state="PENDING")
    with pytest.raises(ApiProblem, match="another listing"):
        paging.decode(cursor, other)


def test_a_cursor_and_an_offset_together_are_refused_naming_offset() -> None:
    cursor = paging.encode("job-1", False, LISTING)
    assert paging.decode_with_offset(cursor, LISTING, 0) == paging.Cursor("job-1", False)
    assert paging.decode_with_offset(None, LISTING, 5) is None  # an offset alone pages as before
    with pytest.raises(ApiProblem) as raised:
        paging.decode_with_offset(cursor, LISTING, 5)
    assert raised.value.status == 422
    assert [e.field for e in raised.value.errors] == ["offset"]
