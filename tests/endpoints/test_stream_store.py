"""A request's stream in the store (SQLite and PostgreSQL): chunks come back in order, each exactly once
however the reads interleave with the writes; a stream is bounded."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalar.store import Store
from scalar.store import endpoints as repo

AT = datetime(2026, 11, 26, tzinfo=UTC)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.one_of(st.integers(1, 4), st.just(0)), max_size=12))
def test_each_chunk_is_taken_exactly_once_in_order(store: Store, steps: list[int]) -> None:
    """``steps``: n > 0 appends n chunks, 0 takes what is new."""
    request_id = f"req-{uuid.uuid4().hex}"  # the store is shared by the examples: a fresh request each
    written: list[int] = []
    taken: list[int] = []
    for step in steps:
        with store.write() as tx:
            if step:
                values = list(range(len(written), len(written) + step))
                assert repo.add_chunks(tx.conn, request_id, values, AT) == len(written) + step
                written.extend(values)
            else:
                taken.extend(repo.take_chunks(tx.conn, request_id))
    with store.write() as tx:
        taken.extend(repo.take_chunks(tx.conn, request_id))
        assert repo.take_chunks(tx.conn, request_id) == []
        assert repo.all_chunks(tx.conn, request_id) == written
    assert taken == written


def test_a_stream_is_bounded(store: Store) -> None:
    with store.write() as tx:
        assert repo.add_chunks(tx.conn, "req-b", ["a", "b"], AT, limit=3) == 2
        assert repo.add_chunks(tx.conn, "req-b", ["c", "d"], AT, limit=3) == -1  # refused whole
        assert repo.add_chunks(tx.conn, "req-b", ["c"], AT, limit=3) == 3
        assert repo.all_chunks(tx.conn, "req-b") == ["a", "b", "c"]
