"""A controller and three agents, each agent on its own "machine": a Linux network namespace joined to the
controller's bridge by a veth pair (tests/agent/netns.py). Jobs run as real processes with fake GPUs and the
faults are real network faults: a node's link is taken down, its lease runs out in real time, and when the
link comes back the node's stale reports are fenced and it rejoins.

Every job appends ``start``/``end`` lines (job, attempt, CUDA_VISIBLE_DEVICES, wall time) to one record
file shared by all namespaces, so the tests check what actually ran: the GPUs each process saw, that no two
processes held the same GPU at the same time, and that each attempt ran once."""

from __future__ import annotations

import itertools
import sys
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.agent.harness import Controller, wait_until
from tests.agent.netns import Host, Network, controller_on, network

pytestmark = pytest.mark.slow  # real agents in network namespaces, end to end

# Records start and end, says which GPUs it got, waits for the file GATE_<attempt> if set (90 s at most),
# runs HOLD_<attempt> (else HOLD) seconds. SIGTERM: waits STOP_S seconds (a job slow to stop), records its
# end and exits.
JOB = (
    "import os, signal, sys, time\n"
    "env = os.environ\n"
    "att, gpus = env['SCALAR_ATTEMPT'], env['CUDA_VISIBLE_DEVICES']\n"
    "def note(what):\n"
    "    with open(env['RECORD'], 'a') as f:\n"
    "        f.write(f\"{what} {env['SCALAR_JOB_ID']} {att} {gpus} {time.time():.3f}\\n\")\n"
    "def term(*_):\n"
    "    time.sleep(float(env.get('STOP_S', '0')))\n"
    "    note('end')\n"
    "    sys.exit(143)\n"
    "signal.signal(signal.SIGTERM, term)\n"
    "note('start')\n"
    "print('attempt', att, 'on', gpus, flush=True)\n"
    "gate, t0 = env.get('GATE_' + att), time.time()\n"
    "while gate and not os.path.exists(gate) and time.time() - t0 < 90:\n"
    "    time.sleep(0.05)\n"
    "time.sleep(float(env.get('HOLD_' + att, env.get('HOLD', '0'))))\n"
    "print('done', flush=True)\n"
    "note('end')\n"
)
COMMAND = [sys.executable, "-c", JOB]
ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")


def start_agents(c: Controller, net: Network, tmp_path: Path, fake_gpus: str) -> dict[str, Host]:
    """One agent per namespace; returns node id -> its host, once every agent is registered and ready."""
    for host in net.hosts:
        host.agent(c.url, c.token(), tmp_path / f"agent{host.index}", fake_gpus).start()
    registered = wait_until(
        lambda: a if len(a := c.agents()) == len(net.hosts) else None, 40, "every agent to register"
    )
    by_name = {h.netns: h for h in net.hosts}
    nodes = {a["node_id"]: by_name[a["facts"]["hostname"]] for a in registered}
    assert len(nodes) == len(net.hosts)
    return nodes


def gpu_uuids(c: Controller) -> dict[str, list[str]]:
    """node id -> its GPU UUIDs by index."""
    return {
        a["node_id"]: [g["uuid"] for g in sorted(a["facts"]["gpus"], key=lambda g: g["index"])]
        for a in c.agents()
    }


def lease(c: Controller, node_id: str) -> str:
    return next(str(a["lease_state"]) for a in c.agents() if a["node_id"] == node_id)


def is_lost(c: Controller, node_id: str) -> bool:
    return "node_lost" in c.story_codes(node_id)


def records(path: Path) -> list[tuple[str, str, str, list[str], float]]:
    """(start|end, job, attempt, GPU UUIDs, time) per line of the record file."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        what, job, attempt, gpus, at = line.split()
        out.append((what, job, attempt, gpus.split(","), float(at)))
    return out


def started(path: Path, job_id: str, attempt: int) -> bool:
    return any(r[0] == "start" and r[1] == job_id and r[2] == str(attempt) for r in records(path))


def ended(path: Path, job_id: str, attempt: int) -> bool:
    return any(r[0] == "end" and r[1] == job_id and r[2] == str(attempt) for r in records(path))


def rejoined(codes: list[str]) -> bool:
    return "node_lost" in codes and "node_ready" in codes[codes.index("node_lost") :]


def check_invariants(path: Path, job_ids: list[str]) -> dict[tuple[str, str], list[str]]:
    """Each (job, attempt) started once and ended once; no GPU held by two processes at the same time.
    Returns (job, attempt) -> the GPUs it saw."""
    rows = records(path)
    starts = Counter((r[1], r[2]) for r in rows if r[0] == "start")
    ends = Counter((r[1], r[2]) for r in rows if r[0] == "end")
    assert set(j for j, _ in starts) <= set(job_ids)
    assert all(n == 1 for n in starts.values()), f"an attempt ran twice: {starts}"
    assert starts == ends, f"every started attempt ended once: starts {starts}, ends {ends}"
    spans: dict[tuple[str, str], list[Any]] = {}
    for what, job, attempt, gpus, at in rows:
        span = spans.setdefault((job, attempt), [gpus, None, None])
        span[1 if what == "start" else 2] = at
    by_gpu: dict[str, list[tuple[float, float, tuple[str, str]]]] = {}
    for key, (gpus, begin, end) in spans.items():
        for uuid in gpus:
            by_gpu.setdefault(uuid, []).append((begin, end, key))
    for uuid, held in by_gpu.items():
        held.sort()
        for (_, end, first), (begin, _, second) in itertools.pairwise(held):
            assert end <= begin, f"GPU {uuid} held by {first} and {second} at the same time"
    return {key: span[0] for key, span in spans.items()}


def test_jobs_on_three_namespaced_agents_get_their_own_gpus_and_ship_their_logs(
    sqlite_url: str, tmp_path: Path
) -> None:
    record = tmp_path / "record.txt"
    with network(3) as net, controller_on(net.address, sqlite_url, tmp_path) as c:
        nodes = start_agents(c, net, tmp_path, "2xH100-80GB")
        uuids = gpu_uuids(c)
        assert len({u for us in uuids.values() for u in us}) == 6  # six distinct GPUs on three machines
        sizes = [2, 1, 1, 2, 1, 1, 2]  # 10 GPUs asked for, 6 exist: some wait for others to end
        jobs = [
            c.submit(gpu_count=n, command=COMMAND, env={"RECORD": str(record), "HOLD": "2"}) for n in sizes
        ]
        chosen: dict[str, list[str]] = {}  # what the packer chose for each job, seen while it ran

        def all_ended() -> bool:
            done = True
            for job_id in jobs:
                job = c.job(job_id)
                if job["state"] == "RUNNING" and job["placements"] and job_id not in chosen:
                    [placement] = job["placements"]
                    chosen[job_id] = [uuids[placement["node_id"]][i] for i in placement["gpu_indices"]]
                done = done and job["state"] in ENDED
            return done

        wait_until(all_ended, 60, "every job to end")
        for job_id in jobs:
            job = c.job(job_id)
            assert job["state"] == "SUCCEEDED", job["reason"]
        seen = check_invariants(record, jobs)
        assert set(seen) == {(j, "1") for j in jobs}  # every job ran once, as attempt 1
        for job_id, n in zip(jobs, sizes, strict=True):
            gpus = seen[(job_id, "1")]
            assert len(gpus) == n
            assert any(set(gpus) <= set(us) for us in uuids.values())  # all on one machine
            if job_id in chosen:
                assert gpus == chosen[job_id]  # exactly the GPUs the packer chose
        assert len(chosen) >= len(jobs) - 1, "the poll should see nearly every 2 s job running"
        machines = {n for gpus in seen.values() for n, us in uuids.items() if set(gpus) <= set(us)}
        assert machines == set(nodes), "every machine ran jobs"
        for job_id in jobs:  # the logs came over each machine's link to the controller
            data = wait_until(partial(c.output, job_id, "done"), 20, "logs")
            assert data == f"attempt 1 on {','.join(seen[(job_id, '1')])}\ndone\n"
        assert {lease(c, node_id) for node_id in nodes} == {"ready"}


def test_a_cut_link_loses_the_node_requeues_its_jobs_and_fences_the_stale_attempts(
    sqlite_url: str, tmp_path: Path
) -> None:
    record = tmp_path / "record.txt"
    with network(3) as net, controller_on(net.address, sqlite_url, tmp_path) as c:
        nodes = start_agents(c, net, tmp_path, "1xH100-80GB")
        gate = tmp_path / "release"  # attempts 2 run until the test is done looking
        base = {"RECORD": str(record), "GATE_2": str(gate)}
        # x's attempt 1 ends (exit 0) while its link is down; y's still runs when the link returns and
        # takes 2 s to stop after SIGTERM
        x = c.submit(command=COMMAND, env={**base, "HOLD_1": "3"})
        y = c.submit(command=COMMAND, env={**base, "HOLD_1": "120", "STOP_S": "2"})
        wait_until(lambda: started(record, x, 1) and started(record, y, 1), 40, "both jobs to start")
        node_x = c.job(x)["placements"][0]["node_id"]
        node_y = c.job(y)["placements"][0]["node_id"]
        assert node_x != node_y  # one GPU per machine
        [spare] = set(nodes) - {node_x, node_y}

        nodes[node_x].cut()
        nodes[node_y].cut()
        # the leases run out in real time (suspect after 3 s, lost after 6 s); the spare keeps calling
        for node_id in (node_x, node_y):
            wait_until(partial(is_lost, c, node_id), 30, f"{node_id} to be LOST")
            codes = c.story_codes(node_id)
            assert codes.index("node_suspect") < codes.index("node_lost"), codes
            assert lease(c, node_id) == "lost"
        assert lease(c, spare) == "ready"

        # both jobs go back to PENDING as attempt 2; one runs on the spare, the other waits for a machine
        def requeued() -> list[dict[str, Any]] | None:
            js = [c.job(x), c.job(y)]
            settled = sorted(j["state"] for j in js) == ["PENDING", "RUNNING"]
            return js if settled and all(j["preemptions"] == 1 for j in js) else None

        jobs = wait_until(requeued, 30, "attempt 2 of one job to run on the spare and the other to wait")
        moved, waiting = (jobs[0], jobs[1]) if jobs[0]["state"] == "RUNNING" else (jobs[1], jobs[0])
        assert moved["placements"][0]["node_id"] == spare
        assert all("node_lost" in c.story_codes(j["id"]) for j in jobs)
        wait_until(lambda: started(record, moved["id"], 2), 20, "attempt 2 on the spare to start")
        wait_until(lambda: ended(record, x, 1), 20, "x's attempt 1 to end, unheard, behind the cut link")

        nodes[node_y].restore()  # y's node rejoins; its attempt 1 still runs: fenced and stopped
        wait_until(lambda: lease(c, node_y) == "ready", 40, "y's node to call again")
        wait_until(lambda: rejoined(c.story_codes(node_y)), 20, "y's node to be READY again")
        wait_until(lambda: "stale_attempt" in c.story_codes(y), 30, "y's stale attempt 1 to be fenced")
        assert c.job(y)["preemptions"] == 1  # the stale report changed nothing
        # the waiting job takes y's machine, once y's attempt 1 has let go of the GPU
        job = wait_until(lambda: (j := c.job(waiting["id"]))["state"] != "PENDING" and j, 30, "placement")
        assert job["preemptions"] == 1 and job["placements"][0]["node_id"] == node_y, job
        wait_until(lambda: started(record, waiting["id"], 2), 30, "the waiting job's attempt 2 to start")

        nodes[node_x].restore()  # x's node rejoins and reports attempt 1 exited 0: fenced, not a success
        wait_until(lambda: lease(c, node_x) == "ready", 40, "x's node to call again")
        wait_until(lambda: rejoined(c.story_codes(node_x)), 20, "x's node to be READY again")
        wait_until(lambda: "stale_attempt" in c.story_codes(x), 30, "x's stale attempt 1 to be fenced")
        job = c.job(x)
        assert job["state"] == "RUNNING" and job["preemptions"] == 1  # attempt 2 is still the job's
        gate.touch()

        for job_id in (x, y):
            job = wait_until(partial(c.ended, job_id), 40, "the job to end")
            assert job["state"] == "SUCCEEDED" and "attempt 2" in job["reason"], job["reason"]
            assert job["preemptions"] == 1
            assert c.logs(job_id)["attempt"] == 2
            latest = wait_until(partial(c.output, job_id, "done"), 20, "logs")
            assert latest.startswith("attempt 2 on GPU-")
        # the stale attempts' output still reached the controller once their machines were back
        first_x = wait_until(lambda: d if "done" in (d := c.logs(x, attempt=1)["data"]) else None, 20, "x:1")
        assert first_x.startswith("attempt 1 on GPU-")
        wait_until(lambda: c.logs(y, attempt=1)["data"].startswith("attempt 1 on GPU-"), 20, "y:1's log")

        seen = check_invariants(record, [x, y])
        assert set(seen) == {(x, "1"), (x, "2"), (y, "1"), (y, "2")}
        uuids = gpu_uuids(c)
        assert seen[(moved["id"], "2")] == uuids[spare] and seen[(waiting["id"], "2")] == uuids[node_y]
        assert {lease(c, node_id) for node_id in nodes} == {"ready"}
        assert len(c.agents()) == 3  # rejoined as the same nodes, nobody registered again
