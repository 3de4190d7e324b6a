"""The virtual-time loop every Protocol B policy runs in: one process, no clock, no controller database.

The loop jumps from moment to moment: the next pod arrival, the market's next move (a node milestone or a
job timer: that is how departures arrive, as job ends the market reports), and the policy's own next
timer (``wake``): a periodic tick every ``tick_s`` while jobs wait (batching, retries), else the moment an
idle node becomes due for release. At each moment it
hands the policy the arrivals and the market's new events; the policy decides and acts on the market
itself. Finishes are read from the market's job-end events, so every policy's finish times, and hence its
waits, are measured the same way.

The clock starts at :data:`ORIGIN` (the window's first second) and stops when every job has finished or
been given up on, or at the safety horizon (the window, plus the longest job, plus ``slack_s``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from scalar.domain.market import NodeEvent
from scalar.sim.dynamic.market import MarketSession, killed
from scalar.sim.dynamic.workload import DynamicJob, Workload

ORIGIN = datetime(2025, 7, 1, tzinfo=UTC)
DEFAULT_TICK_S = 60.0
DEFAULT_SLACK_S = 7 * 86_400.0

Progress = Callable[[float, float], None]  # (simulated seconds done, simulated seconds expected)


class LoopPolicy(Protocol):
    """What a policy implements to run in the loop."""

    def step(self, now: datetime, arrivals: list[DynamicJob], events: list[NodeEvent]) -> None: ...

    def wake(self, now: datetime, tick_s: float) -> datetime | None:
        """When the policy next needs a step though nothing arrives and the market does not move (its
        own timers: idle release, batching, retries), or ``None``."""
        ...

    def given_up(self) -> set[str]:
        """Jobs the policy will never run (refused); the loop stops waiting for them."""
        ...


@dataclass(slots=True)
class RunTrace:
    """What the loop saw: when each job finished, how long the run lasted, how many steps it took."""

    finished_at: dict[str, datetime] = field(default_factory=dict)
    started_at: datetime = ORIGIN
    ended_at: datetime = ORIGIN
    steps: int = 0
    killed_runs: int = 0
    timed_out: bool = False


def run_loop(
    workload: Workload,
    session: MarketSession,
    policy: LoopPolicy,
    *,
    tick_s: float = DEFAULT_TICK_S,
    slack_s: float = DEFAULT_SLACK_S,
    progress: Progress | None = None,
) -> RunTrace:
    jobs = workload.jobs
    trace = RunTrace(started_at=ORIGIN, ended_at=ORIGIN)
    longest = max((j.duration_s for j in jobs), default=0.0)
    horizon = ORIGIN + timedelta(seconds=workload.horizon_s + longest + slack_s)
    expected = workload.horizon_s + 1.0
    wanted = {j.job_id for j in jobs}
    i = 0
    now = ORIGIN
    while True:
        arrivals: list[DynamicJob] = []
        while i < len(jobs) and ORIGIN + timedelta(seconds=jobs[i].arrival_s) <= now:
            arrivals.append(jobs[i])
            i += 1
        events = session.events(now)
        for e in events:
            if e.job_id is not None and e.job_id in wanted:
                if e.job_succeeded:
                    trace.finished_at.setdefault(e.job_id, e.at)
                elif killed(e):
                    trace.killed_runs += 1
        policy.step(now, arrivals, events)
        trace.steps += 1
        if progress is not None:
            progress(min(expected, (now - ORIGIN).total_seconds()), expected)
        if i >= len(jobs) and len(trace.finished_at) + len(policy.given_up() & wanted) >= len(wanted):
            later = session.events(now)  # anything due at this very instant (it is accounted for)
            if later:
                policy.step(now, [], later)
            break
        candidates: list[datetime] = []
        if i < len(jobs):
            candidates.append(ORIGIN + timedelta(seconds=jobs[i].arrival_s))
        move = session.next_move()
        if move is not None:
            candidates.append(move)
        wake = policy.wake(now, tick_s)
        if wake is not None:
            candidates.append(wake)
        if not candidates:
            break
        nxt = max(min(candidates), now + timedelta(microseconds=1))
        if nxt > horizon:
            trace.timed_out = True
            now = horizon
            break
        now = nxt
    trace.ended_at = now
    if progress is not None:
        progress(expected, expected)
    return trace
