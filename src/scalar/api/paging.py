"""Cursor paging for the API's lists (``GET /jobs``, ``/nodes``, ``/blocks``, ``/endpoints``, ``/audit``).

Every list has a stable order with a unique tie-breaker (its id, or creation time then id), a default page
size and a maximum (``limit`` above the maximum: 422 naming ``limit``; never silently clamped), and pages
with an opaque cursor: the answer's ``next`` (``null`` on the last page) is passed back as ``after``, and
``prev`` (``null`` on the first page) the same way to go back.

A cursor is ``base64url(JSON)`` of the row key it continues from, the direction, and a fingerprint of the
listing it belongs to (the list, its filters and order, and the caller's tenant). A cursor is not a secret
and not signed: it holds only the key of a row the caller was shown, and every page is read with the
caller's own filters, so a forged or borrowed cursor can only move the start of a page through rows the
caller may list anyway. A cursor of another listing (other filters, another tenant) or any other text is
refused with a 422 problem naming ``after``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from scalar.api.problems import ApiProblem
from scalar.wire.jobs import FieldProblem

T = TypeVar("T")
Key = Any  # a JSON value: a row id, or [created_at, id]

MAX_CURSOR_LENGTH = 1000
CURSOR_FIX = (
    "pass the `next` (or `prev`) of a page this list returned, with the same filters; "
    "leave `after` out to start from the first page"
)


@dataclass(frozen=True, slots=True)
class Cursor:
    key: Key
    backwards: bool  # a ``prev`` cursor: the rows before ``key`` in the list's order


def fingerprint(listing: str, **filters: Any) -> str:
    """A short digest of what a cursor belongs to: the list and every filter that shapes it."""
    text = json.dumps([listing, sorted((k, v) for k, v in filters.items())], default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def encode(key: Key, backwards: bool, listing: str) -> str:
    raw = json.dumps({"k": key, "b": int(backwards), "l": listing}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def bad_cursor(problem: str) -> ApiProblem:
    return ApiProblem(
        422,
        "invalid-request",
        f"after: {problem}",
        [FieldProblem(field="after", problem=problem, fix=CURSOR_FIX)],
    )


def decode(cursor: str | None, listing: str) -> Cursor | None:
    """The cursor ``after`` names, or ``None`` for the first page; raises a 422 ``ApiProblem`` naming
    ``after`` for anything this listing did not hand out."""
    if cursor is None or cursor == "":
        return None
    if len(cursor) > MAX_CURSOR_LENGTH:
        raise bad_cursor(f"is {len(cursor)} characters long; a cursor is at most {MAX_CURSOR_LENGTH}")
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")).decode("utf-8"))
    except (ValueError, UnicodeError, binascii.Error):
        raise bad_cursor("is not a cursor this server returned") from None
    if not isinstance(data, dict) or set(data) != {"k", "b", "l"} or data["b"] not in (0, 1):
        raise bad_cursor("is not a cursor this server returned")
    if data["l"] != listing:
        raise bad_cursor(
            "belongs to another listing (other filters, order or caller); start again without it"
        )
    key = data["k"]
    if not _valid_key(key):
        raise bad_cursor("is not a cursor this server returned")
    return Cursor(key, bool(data["b"]))


def decode_with_offset(cursor: str | None, listing: str, offset: int) -> Cursor | None:
    """``decode`` for a list that also takes ``offset``: a cursor and an offset together are a 422 problem
    naming ``offset`` (a cursor says where the page starts; an offset would move it again)."""
    decoded = decode(cursor, listing)
    if decoded is not None and offset:
        raise ApiProblem(
            422,
            "invalid-request",
            "offset: give either after (a cursor) or offset, not both",
            [FieldProblem(field="offset", problem="is given with after", fix="leave offset out with after")],
        )
    return decoded


def _valid_key(key: Any) -> bool:
    if isinstance(key, str):
        return 0 < len(key) <= 400
    if isinstance(key, int) and not isinstance(key, bool):
        return 0 <= key < 2**63
    if isinstance(key, list) and len(key) == 2:
        return all(isinstance(k, str) and 0 < len(k) <= 400 for k in key)
    return False


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    next: str | None
    prev: str | None


Fetch = Callable[[Key | None, bool, int], Sequence[T]]
"""``fetch(after_key, reverse, n)``: at most ``n`` rows strictly after ``after_key`` (``None``: from the
start) in the list's order, or with ``reverse`` in the opposite order (strictly before ``after_key``)."""


def page(
    fetch: Fetch[T], key_of: Callable[[T], Key], limit: int, cursor: Cursor | None, listing: str
) -> Page[T]:
    """One page of ``limit`` rows from ``cursor``, with the cursors of the pages after and before it.

    Reads ``limit + 1`` rows to know whether another page follows (no count of the whole list)."""
    if cursor is not None and cursor.backwards:
        rows = list(fetch(cursor.key, True, limit + 1))
        if len(rows) <= limit:  # back at the start: the first page, whole
            return page(fetch, key_of, limit, None, listing)
        items = list(reversed(rows[:limit]))
        return Page(items, encode(key_of(items[-1]), False, listing), encode(key_of(items[0]), True, listing))
    after = None if cursor is None else cursor.key
    rows = list(fetch(after, False, limit + 1))
    items = rows[:limit]
    nxt = encode(key_of(items[-1]), False, listing) if len(rows) > limit else None
    prev = encode(key_of(items[0]), True, listing) if cursor is not None and items else None
    return Page(items, nxt, prev)


__all__ = ["CURSOR_FIX", "Cursor", "Page", "bad_cursor", "decode", "encode", "fingerprint", "page"]
