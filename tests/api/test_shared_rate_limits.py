"""Rate limits shared by every API process on one database (``store/ratelimit.py``, ``SharedRateLimiter``).

In the store: the bucket in the database decides as one in-memory token bucket fed the same requests would
(a property test), and two stores (two connection pools, as two processes) draw on one bucket. Across
processes: two ``scalar api`` processes on one database, one token hitting both, get one budget in sum."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalar.api.auth import RateLimiter, SharedRateLimiter
from scalar.runtime import ControlPlane, load_settings
from scalar.store import Store
from tests.conftest import REPO


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rate=st.sampled_from([0.5, 2.0, 10.0]),
    burst=st.integers(min_value=1, max_value=6),
    steps=st.lists(st.tuples(st.sampled_from([0.0, 0.05, 0.3, 1.0, 4.0]), st.integers(0, 1)), max_size=40),
)
def test_database_bucket_decides_as_one_bucket_would(
    store: Store, rate: float, burst: int, steps: list[tuple[float, int]]
) -> None:
    """Whichever of two processes asks, the shared bucket grants exactly what one token bucket would."""
    key = f"prop:{time.monotonic_ns()}"  # a fresh bucket per example (the store lives across examples)
    now = 1_000_000.0
    reference = RateLimiter(rate, burst, clock=lambda: now)
    granted = 0
    for delay, _process in steps:
        now += delay
        expected = reference.take(key)
        taken, level = store.take_token(key, rate, burst, now)
        assert taken == (expected == 0.0)
        assert 0.0 <= level <= burst
        granted += taken
    assert granted <= burst + rate * (now - 1_000_000.0) + 1e-9


def test_two_stores_share_one_bucket(migrated_url: str) -> None:
    a, b = Store.open(migrated_url), Store.open(migrated_url)
    try:
        results = [s.take_token("t:one", 1.0, 5, 100.0)[0] for s in (a, b) * 5]
        assert results == [True] * 5 + [False] * 5  # the sum, not 5 each
        assert a.take_token("t:one", 1.0, 5, 101.0)[0]  # a second later: one token back
        assert not b.take_token("t:one", 1.0, 5, 101.0)[0]
        assert a.take_token("t:other", 1.0, 5, 101.0)[0]  # keys are separate
        # a clock behind the last writer's refills nothing (and takes nothing)
        assert not b.take_token("t:one", 1.0, 5, 50.0)[0]
        assert a.forget_tokens("t:", 101.0) == 0  # touched at 101: kept
        assert a.forget_tokens("t:", 200.0) == 2
        assert a.take_token("t:one", 1.0, 5, 200.0) == (True, 4.0)  # forgotten means full
    finally:
        a.close()
        b.close()


def test_limiter_refuses_locally_without_asking_the_database(migrated_url: str) -> None:
    """Once this process's bucket is empty a flood costs no database write; a database that cannot answer
    leaves the decision to the local bucket instead of failing the request."""
    store = Store.open(migrated_url)
    now = [10.0]
    calls: list[str] = []

    class Counting:
        def take_token(
            self, key: str, rate: float, burst: float, at: float, want: int = 1
        ) -> tuple[int, float]:
            calls.append(key)
            return store.take_token(key, rate, burst, at, want)

        def forget_tokens(self, prefix: str, before: float) -> int:
            return store.forget_tokens(prefix, before)

    try:
        limiter = SharedRateLimiter(Counting(), "token", 1.0, 3, clock=lambda: now[0])
        other = SharedRateLimiter(store, "token", 1.0, 3, clock=lambda: now[0])
        assert other.take("tok") == 0.0  # another process spent one of the three
        waits = [limiter.take("tok") for _ in range(50)]
        assert waits[:2] == [0.0, 0.0] and all(w > 0 for w in waits[2:])
        assert len(calls) == 2  # the second grant told this process the shared bucket was empty
        broken = SharedRateLimiter(None, "token", 1.0, 2, clock=lambda: now[0])
        assert [broken.take("x") for _ in range(3)][:2] == [0.0, 0.0]
        assert broken.take("x") > 0
    finally:
        store.close()


def test_a_lease_takes_the_whole_tokens_the_bucket_holds_in_one_write(migrated_url: str) -> None:
    store = Store.open(migrated_url)
    try:
        assert store.take_token("l:one", 1.0, 5, 100.0, 3) == (3, 2.0)  # a new bucket starts full
        assert store.take_token("l:one", 1.0, 5, 100.0, 3) == (2, 0.0)  # only two were left
        assert store.take_token("l:one", 1.0, 5, 100.0, 3) == (0, 0.0)
        taken, level = store.take_token("l:one", 1.0, 5, 101.5, 3)  # 1.5 refilled: one whole token
        assert taken == 1 and level == pytest.approx(0.5)
        with pytest.raises(ValueError, match="at least 1"):
            store.take_token("l:one", 1.0, 5, 102.0, 0)
    finally:
        store.close()


def test_a_busy_key_costs_one_write_per_lease_not_per_request(migrated_url: str) -> None:
    store = Store.open(migrated_url)
    writes: list[int] = []

    class Counting:
        def take_token(
            self, key: str, rate: float, burst: float, at: float, want: int = 1
        ) -> tuple[int, float]:
            writes.append(want)
            return store.take_token(key, rate, burst, at, want)

        def forget_tokens(self, prefix: str, before: float) -> int:
            return store.forget_tokens(prefix, before)

    try:
        limiter = SharedRateLimiter(Counting(), "token", 50.0, 200, clock=lambda: 10.0)
        assert limiter.lease == 13  # a quarter second of 50 a second, rounded up
        assert [limiter.take("busy") for _ in range(100)] == [0.0] * 100
        assert len(writes) == 8 and set(writes) == {13}  # ceil(100 / 13)
        strict = SharedRateLimiter(store, "failure", 0.2, 5)
        assert strict.lease == 1  # a strict limit asks the database every time
    finally:
        store.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rate=st.sampled_from([8.0, 50.0, 200.0]),
    burst=st.sampled_from([16, 64, 200]),
    steps=st.lists(
        st.tuples(st.sampled_from([0.0, 0.0, 0.01, 0.05, 0.3, 1.0]), st.integers(0, 2)),
        min_size=1,
        max_size=120,
    ),
)
def test_leasing_processes_never_grant_more_than_one_bucket(
    store: Store, rate: float, burst: int, steps: list[tuple[float, int]]
) -> None:
    """Three processes leasing tokens from one shared bucket: together they grant at most what one bucket
    allows over the same time (burst + rate x elapsed), whatever the interleaving."""
    namespace = f"lease{time.monotonic_ns()}"  # a fresh bucket per example
    now = [1_000_000.0]
    processes = [SharedRateLimiter(store, namespace, rate, burst, clock=lambda: now[0]) for _ in range(3)]
    granted = 0
    for delay, which in steps:
        now[0] += delay
        granted += processes[which].take("k") == 0.0
    assert granted <= burst + rate * (now[0] - 1_000_000.0) + 1e-9


def _get(url: str, token: str) -> int:
    request = urllib.request.Request(url, headers={"authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            reply.read()
            return int(reply.status)
    except urllib.error.HTTPError as err:
        body = json.loads(err.read())
        assert err.code == 429 and body["type"].endswith("rate-limited"), body
        assert int(err.headers["Retry-After"]) >= 1
        return err.code


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
def test_two_api_processes_share_one_tokens_budget(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = request.getfixturevalue("pg_url" if backend == "postgresql" else "sqlite_url")
    config = tmp_path / "scalar.toml"
    config.write_text("[server]\nrate_per_s = 0.2\nrate_burst = 20\n")
    settings_ = load_settings(config, {"data_dir": tmp_path, "database_url": url}, {})
    plane = ControlPlane(settings_)
    plane.open()
    token = plane.create_token("default", "user", "rate test").token
    plane.stop()
    env = {**os.environ, "SCALAR_DATABASE_URL": url, "PYTHONPATH": str(REPO / "src")}
    logs = [tmp_path / f"api{i}.log" for i in range(2)]
    command = [sys.executable, "-m", "scalar", "api", "--config", str(config), "--data-dir", str(tmp_path)]
    procs = [
        subprocess.Popen(
            [*command, "--port", "0"],
            cwd=REPO,
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        for log in logs
    ]
    try:
        servers = []
        for log in logs:
            deadline = time.monotonic() + 60
            while (found := re.search(r"scalar api on (http://\S+)", log.read_text())) is None:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            servers.append(found.group(1))
        started = time.monotonic()
        answers: list[list[int]] = [[], []]
        for _ in range(20):  # 40 requests, alternating: each process alone would allow 20
            for i, server in enumerate(servers):
                answers[i].append(_get(f"{server}/jobs?limit=1", token))
        elapsed = time.monotonic() - started
        ok = [a.count(200) for a in answers]
        assert all(a.count(200) + a.count(429) == 20 for a in answers)
        assert sum(ok) <= 20 + 0.2 * elapsed + 1, (ok, elapsed)
        assert sum(ok) >= 20 and all(n > 0 for n in ok)  # both served; the burst was spent in sum
        assert all(429 in a for a in answers)  # both refused once the shared bucket was empty
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(20)
