"""The job and slice transition tables, driven at random through the controller.

Each rule asks for one move (job j -> SUCCEEDED, node n -> READY...) by sending the event that would cause
it. If the table allows the move, the controller makes it (its story shows the move under that event's
stimulus id); if not, ``check_move`` raises ``IllegalTransitionError`` and the controller ignores the
event without raising. After every step: no GPU booked twice, no job in two places, no job lost.
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from scalar.domain.market import NodeEvent, NodeState
from scalar.engine import (
    Action,
    BuyCapacity,
    Controller,
    ControllerConfig,
    IllegalTransitionError,
    JobCancelRequested,
    JobStarted,
    JobState,
    NodeReported,
    ScaleGroupConfig,
    Tick,
)
from scalar.engine.events import Event
from scalar.engine.lifecycle import JOB_TRANSITIONS, SLICE_TRANSITIONS, check_move, is_legal
from tests.engine.builders import at, filled, market, prime_offer, rejected, sf_offer, spec, submit
from tests.engine.invariants import check_all

EVENT_DRIVEN_JOB_TARGETS = (
    JobState.RUNNING,
    JobState.SUCCEEDED,
    JobState.FAILED,
    JobState.CANCELLED,
    JobState.PREEMPTED,
)
NODE_TARGETS = (
    NodeState.BOOTING,
    NodeState.INITIALIZING,
    NodeState.READY,
    NodeState.FAILED,
    NodeState.TERMINATED,
)


class Lifecycles(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        config = ControllerConfig(
            scale_groups=(ScaleGroupConfig(max_slices=3),), request_timeout_s=900, flex_batch_wait_s=0
        )
        self.c = Controller(config)
        self.t = 0
        self.n = 0
        self.history: list[list[Action]] = []
        self.submitted: list[str] = []
        self.buys: list[BuyCapacity] = []
        self.send([market(sf_offer(), prime_offer(gpus=2))])

    # ---- plumbing ------------------------------------------------------------------------------------

    def send(self, events: list[Event], seconds: int = 30) -> list[Action]:
        self.t += seconds
        actions = self.c.step(at(self.t), events)
        self.history.append(actions)
        self.buys += [a for a in actions if isinstance(a, BuyCapacity)]
        return actions

    def sid(self) -> str:
        self.n += 1
        return f"sm-{self.n}"

    def moved(self, key: str, stimulus: str, target: str) -> bool:
        return any(e.stimulus_id == stimulus and e.to_state == target for e in self.c.story(key))

    # ---- world events --------------------------------------------------------------------------------

    @rule(
        gpus=st.sampled_from([0, 1, 2, 4, 8, 16]), tier=st.sampled_from(["FAST", "FLEX"]), share=st.booleans()
    )
    def submit_job(self, gpus: int, tier: str, share: bool) -> None:
        job_id = f"j{len(self.submitted)}"
        self.submitted.append(job_id)
        self.send(submit(spec(job_id, gpus, tier=tier, vram=30, share=share, duration=1800)))

    @precondition(lambda self: bool(self.buys))
    @rule(data=st.data(), accept=st.booleans())
    def answer_a_purchase(self, data: st.DataObject, accept: bool) -> None:
        buy = data.draw(st.sampled_from(self.buys))
        when = at(self.t + 30)
        event = filled(buy, when, block_id=f"b-{buy.action_id}") if accept else rejected(buy)
        self.send([event])

    @rule(seconds=st.sampled_from([60, 600, 3600]))
    def time_passes(self, seconds: int) -> None:
        self.send([Tick(self.sid())], seconds)

    # ---- requested moves -----------------------------------------------------------------------------

    @precondition(lambda self: bool(self.submitted))
    @rule(data=st.data(), wanted=st.sampled_from(list(JobState)))
    def move_a_job(self, data: st.DataObject, wanted: JobState) -> None:
        target = wanted
        job_id = data.draw(st.sampled_from(self.submitted))
        rec = self.c.state.jobs[job_id]
        current = rec.state
        legal = is_legal("job", current, target)
        assert legal == (target in JOB_TRANSITIONS[current])
        if not legal:
            with pytest.raises(IllegalTransitionError):
                check_move("job", job_id, current, target)
        if target not in EVENT_DRIVEN_JOB_TARGETS:
            return  # PENDING/SCHEDULED/REJECTED are the controller's own decisions, not an event's
        node = next(iter(rec.parts), None) or next(iter(self.c.state.nodes), "no-node")
        block = self.c.state.nodes[node].block_id if node in self.c.state.nodes else "no-block"
        sid = self.sid()
        when = at(self.t)
        event: Event
        if target is JobState.RUNNING:
            event = JobStarted(sid, job_id, node)
        elif target is JobState.CANCELLED:
            event = JobCancelRequested(sid, job_id)
        else:
            outcome = {JobState.SUCCEEDED: True, JobState.FAILED: False, JobState.PREEMPTED: None}[target]
            event = NodeReported(sid, NodeEvent(node, block, when, job_id=job_id, job_succeeded=outcome))
        on_node = node in rec.parts or target is JobState.CANCELLED
        self.send([event])
        if legal and on_node:
            assert self.moved(job_id, sid, target.value), (job_id, current, target)
        else:
            assert not self.moved(job_id, sid, target.value), (job_id, current, target)

    @precondition(lambda self: bool(self.c.state.nodes))
    @rule(data=st.data(), wanted=st.sampled_from(NODE_TARGETS))
    def move_a_node(self, data: st.DataObject, wanted: NodeState) -> None:
        target = wanted
        node_id = data.draw(st.sampled_from(sorted(self.c.state.nodes)))
        node = self.c.state.nodes[node_id]
        current = node.state
        legal = is_legal("node", current, target)
        assert legal == (target in SLICE_TRANSITIONS[current])
        if not legal:
            with pytest.raises(IllegalTransitionError):
                check_move("node", node_id, current, target)
        sid = self.sid()
        self.send([NodeReported(sid, NodeEvent(node_id, node.block_id, at(self.t), state=target))])
        assert self.moved(node_id, sid, target.value) == legal, (node_id, current, target)
        slice_ = self.c.state.slices[node.slice_id]
        assert slice_.state is not None
        if target in (NodeState.FAILED, NodeState.TERMINATED) and legal:
            assert slice_.state in (NodeState.FAILED, NodeState.TERMINATED)

    # ---- invariants ----------------------------------------------------------------------------------

    @invariant()
    def nothing_double_booked_lost_or_duplicated(self) -> None:
        if hasattr(self, "c"):
            check_all(self.c, self.history, self.submitted)

    @invariant()
    def slices_follow_the_table(self) -> None:
        if not hasattr(self, "c"):
            return
        for sl in self.c.state.slices.values():
            states = [e.to_state for e in self.c.story(sl.id) if e.kind == "slice"]
            previous = None
            for s in states:
                assert s is not None
                nxt = NodeState(s)
                assert is_legal("slice", previous, nxt), (sl.id, states)
                previous = nxt


Lifecycles.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
test_lifecycles = Lifecycles.TestCase
