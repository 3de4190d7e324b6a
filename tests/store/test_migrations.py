"""The schema comes from the migrations, and the migrations build exactly what schema.py declares."""

from __future__ import annotations

import threading

from sqlalchemy import inspect, text

from scalar.store import Store, current_revision, head_revision, make_engine, migrate, schema_diff
from scalar.store.schema import metadata

TABLES = {
    "actions",
    "batches",
    "blocks",
    "decisions",
    "events",
    "inbox",
    "jobs",
    "leases",
    "nodes",
    "orders",
    "runtime_state",
    "snapshot_parts",
    "scale_groups",
    "spot_prices",
    # 0003 endpoints, 0004 agents, 0005 auth, 0006 budgets (0007 and 0008 add columns only)
    "endpoints",
    "endpoint_workers",
    "endpoint_requests",
    "endpoint_scaling",
    "endpoint_stream_chunks",
    "agents",
    "agent_join_tokens",
    "agent_assignments",
    "agent_log_chunks",
    "api_tokens",
    "audit_log",
    "budget_limits",
    "budget_spend",
    "rate_buckets",
}


def test_a_fresh_database_migrates_to_head(db_url: str) -> None:
    assert current_revision(db_url) is None
    migrate(db_url)
    assert current_revision(db_url) == head_revision() == "0011_snap"
    engine = make_engine(db_url)
    try:
        assert set(inspect(engine).get_table_names()) == TABLES | {"alembic_version"}
    finally:
        engine.dispose()


def test_migrating_twice_is_a_noop(db_url: str) -> None:
    migrate(db_url)
    with Store.open(db_url) as store, store.write() as tx:
        tx.upsert_projection("jobs", "j1", "PENDING", {"kept": True})
    migrate(db_url)
    with Store.open(db_url) as store, store.read() as tx:
        assert current_revision(store.engine) == head_revision()
        assert tx.get_projection("jobs", "j1").data == {"kept": True}  # type: ignore[union-attr]


def test_the_migrated_schema_matches_the_metadata(db_url: str) -> None:
    migrate(db_url)
    assert schema_diff(db_url) == []
    assert set(metadata.tables) == TABLES


def test_the_schema_check_notices_a_drift(db_url: str) -> None:
    migrate(db_url)
    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("DROP INDEX ix_jobs_state"))
        diff = schema_diff(engine)
    finally:
        engine.dispose()
    assert [d[0] for d in diff] == ["add_index"]


def test_two_processes_migrating_at_once_both_succeed(db_url: str) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def run() -> None:
        try:
            barrier.wait()
            migrate(db_url)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert current_revision(db_url) == head_revision()
    assert schema_diff(db_url) == []
