"""Every purchase and release is attributed to a tenant in the audit log, in the transaction that stores it."""

from __future__ import annotations

from sqlalchemy import select

from scalar.engine import Controller, ControllerConfig, ReleaseNodes
from scalar.runtime.auth import audit_entries
from scalar.store.schema import actions
from scalar.store.schema_auth import audit_log
from tests.engine.builders import at, tick
from tests.engine.test_idle_release import two_pods_one_busy
from tests.runtime.helpers import drive, job
from tests.security.conftest import Secured


def test_purchases_and_releases_are_audited_with_their_tenant(secured: Secured) -> None:
    cp = secured.cp
    submitted = cp.submit_job({**job(gpus=2, duration=30), "tenant": "team-a"})
    drive([cp], secured.clock, 400, step_s=5.0)
    assert cp.get_job(submitted.id).state == "SUCCEEDED"  # type: ignore[union-attr]

    assert cp.store is not None
    with cp.store.read() as tx:
        stored = {r.action_id: r for r in tx.conn.execute(select(actions))}
        rows = list(tx.conn.execute(select(audit_log).where(audit_log.c.action.in_(["buy", "release"]))))
    buys = {a: r for a, r in stored.items() if r.kind == "BuyCapacity"}
    releases = {a: r for a, r in stored.items() if r.kind == "ReleaseBlock"}
    assert buys and releases
    # exactly one row per purchase and release (one tenant here), written in the action's own batch
    assert sorted(r.entity_id for r in rows if r.action == "buy") == sorted(buys)
    assert sorted(r.entity_id for r in rows if r.action == "release") == sorted(releases)
    for row in rows:
        assert row.batch_id == stored[row.entity_id].batch_id
        assert row.actor == "controller"
    assert {r.tenant for r in rows} == {"team-a"}  # the only tenant with work: every row is its
    for row in rows:
        if row.action == "buy":
            assert row.data["for_jobs"] == [submitted.id]
            assert row.data["provider"] and row.data["node_count"] >= 1
        else:
            assert row.data["bought_for_jobs"] == [submitted.id] and row.data["why"] == "idle"

    with secured.client(secured.admin) as admin:
        page = admin.get("/audit", params={"tenant": "team-a", "action": "buy"}).json()
        assert page["count"] >= 1
        assert {e["tenant"] for e in page["entries"]} == {"team-a"}
        assert {e["action"] for e in page["entries"]} == {"buy"}
        after = page["entries"][0]["id"]
        later = admin.get("/audit", params={"after_id": after}).json()["entries"]
        assert all(e["id"] > after for e in later)
    with secured.client(secured.token("team-a")) as user:
        assert user.get("/audit").status_code == 403


def test_a_release_of_single_nodes_is_audited_with_the_nodes() -> None:
    c = Controller(ControllerConfig(idle_release_s=1800))
    two_pods_one_busy(c)
    actions = c.step(at(4_060), [tick()])
    [release] = [a for a in actions if isinstance(a, ReleaseNodes)]
    [entry] = audit_entries(actions, c.state, at(4_060))
    assert (entry.action, entry.entity_id, entry.tenant) == ("release", release.action_id, "default")
    assert entry.data["node_ids"] == list(release.node_ids) and entry.data["why"] == "idle"
    assert entry.data["bought_for_jobs"] == ["short", "long"]
