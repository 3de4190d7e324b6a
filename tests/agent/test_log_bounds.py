"""Bounded job output: the agent ships at most ``log_max_bytes_per_attempt`` of an
attempt's output and says how much it dropped; the controller keeps at most ``[logs]
max_bytes_per_tenant`` per tenant (oldest finished jobs' output first) and nothing past ``retention_s``."""

from __future__ import annotations

import re
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from scalar.agent.capped_log import CappedLog, truncation_note
from scalar.runtime.agents import logs_to_prune
from scalar.store import agents as repo
from tests.agent.harness import Controller, agent, controller, kill_tree_of, wait_until

CAP = 1_000_000
LOUD = (
    "import sys\nblock = b'y' * 999 + b'\\n'\nfor _ in range(200_000):\n    sys.stdout.buffer.write(block)\n"
)


def whole_log(c: Controller, job_id: str) -> str:
    out, offset = [], 0
    while True:
        page = c.logs(job_id, offset=offset)
        out.append(page["data"])
        if page["next_offset"] == offset:
            return "".join(out)
        offset = page["next_offset"]


def test_a_200_mb_log_is_capped_and_says_how_much_was_dropped(sqlite_url: str, tmp_path: Path) -> None:
    with controller(sqlite_url, tmp_path) as c:
        state = tmp_path / "a"
        node = agent(c.url, c.token(), state, "1xH100-80GB", "--log-max-bytes-per-attempt", str(CAP)).start()
        try:
            job_id = c.submit(command=["python", "-c", LOUD])
            done = wait_until(lambda: c.job(job_id)["state"] == "SUCCEEDED", 120, "the loud job")
            assert done
            text = wait_until(
                lambda: t if "truncated" in (t := whole_log(c, job_id)) else None, 60, "the truncation note"
            )
            body, _, note = text.partition("\n[scalar: output truncated")
            assert len(body) == CAP and set(body) <= {"y", "\n"}
            dropped = int(re.search(r"(\d+) more bytes were dropped", note).group(1))  # type: ignore[union-attr]
            assert dropped == 200_000_000 - CAP
            assert f"stops at {CAP} bytes" in note
            with c.plane.store.read() as tx:  # type: ignore[union-attr]
                stored = repo.log_length(tx.conn, f"{job_id}:1")
            assert CAP < stored < CAP + 300  # the cap and the note, not 200 MB
        finally:
            node.stop()
            kill_tree_of(state)


def test_the_controller_prunes_the_oldest_finished_output_per_tenant_and_after_retention(
    sqlite_url: str, tmp_path: Path
) -> None:
    with controller(sqlite_url, tmp_path, logs_max_bytes_per_tenant=250_000) as c:
        state = tmp_path / "a"
        node = agent(c.url, c.token(), state, "2xH100-80GB").start()
        try:
            say = "import sys; sys.stdout.write('z' * 100_000)"
            ids = []
            for _ in range(3):  # one after the other: the first is the oldest
                ids.append(c.submit(command=["python", "-c", say]))
                wait_until(lambda: len(c.logs(ids[-1])["data"]) == 100_000, 60, "its output")
            running = c.submit(command=["python", "-c", "import time; print('x' * 300_000); time.sleep(60)"])
            wait_until(lambda: len(c.logs(running)["data"]) > 0, 60, "the running job's output")
            now = c.clock()
            pruned = c.plane.agents.prune_logs(now)
            # 600 KB stored, 250 KB allowed: every finished job's output goes, oldest first; the running
            # job's is kept even though it alone is over the limit
            assert set(pruned) <= set(ids)  # (the leader's own pruning may have come first)
            assert all(c.logs(j)["data"] == "" for j in ids) and c.logs(running)["data"]
            c.plane.agents.prune_logs(now + timedelta(days=8))
            assert c.logs(running)["data"]  # retention does not touch a running job either
        finally:
            node.stop()
            kill_tree_of(state)


T0 = datetime(2026, 1, 1, tzinfo=UTC)
logs_strategy = st.lists(
    st.builds(
        repo.StoredLog,
        job_id=st.uuids().map(str),
        tenant=st.sampled_from(["a", "b", "c"]),
        finished=st.booleans(),
        size_bytes=st.integers(0, 1000),
        last_at=st.integers(0, 20 * 86400).map(lambda s: T0 + timedelta(seconds=s)),
    ),
    max_size=30,
)


@given(logs_strategy, st.integers(1, 5000), st.integers(1, 20 * 86400))
def test_pruning_keeps_running_jobs_fits_each_tenant_and_goes_oldest_first(
    stored: list[repo.StoredLog], cap: int, retention_s: int
) -> None:
    now = T0 + timedelta(days=20)
    doomed = set(logs_to_prune(stored, now, max_bytes_per_tenant=cap, retention_s=retention_s))
    cutoff = now - timedelta(seconds=retention_s)
    for log in stored:
        if not log.finished:
            assert log.job_id not in doomed
        elif log.last_at < cutoff:
            assert log.job_id in doomed
    for tenant in {log.tenant for log in stored}:
        mine = [log for log in stored if log.tenant == tenant]
        kept = [log for log in mine if log.job_id not in doomed]
        # within the cap, unless only running jobs' output is left
        assert sum(log.size_bytes for log in kept) <= cap or not any(log.finished for log in kept)
        # a kept finished job is never older than a pruned one of its tenant (beyond retention)
        pruned_by_size = [log for log in mine if log.job_id in doomed and log.last_at >= cutoff]
        for gone in pruned_by_size:
            assert all(log.last_at >= gone.last_at for log in kept if log.finished)


@given(
    st.binary(max_size=3000), st.one_of(st.none(), st.integers(1, 2000)), st.booleans(), st.integers(1, 700)
)
def test_reading_a_capped_log_in_chunks_gives_the_cap_then_the_note(
    data: bytes, cap: int | None, ended: bool, chunk: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "output.log"
        path.write_bytes(data)
        log = CappedLog(path, cap, ended)
        shipped, offset = b"", 0
        while piece := log.read(offset, chunk):
            assert len(piece) <= chunk
            shipped += piece
            offset += len(piece)
        assert len(shipped) == log.length()
        if cap is None or len(data) <= cap:
            assert shipped == data
        else:
            assert shipped[:cap] == data[:cap]
            assert shipped[cap:] == (truncation_note(cap, len(data) - cap) if ended else b"")
