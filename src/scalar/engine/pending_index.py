"""The pending jobs indexed by shape, each shape's jobs in queue order (maintained by ``ClusterState``).

The queue order is ``domain.packing_model.order_pending``'s: priority (higher first), then arrival
(``submitted_at``, jobs without one last), full ties in the order the jobs became PENDING. Each job gets
an *order key* carrying exactly that, made unique by a sequence number taken when it becomes PENDING, so
the whole queue is the merge of the per-shape queues (``ordered``) and a pass never sorts all pending jobs.

A *shape* is what the scheduler's and the autoscaler's shortcuts key on: tier, GPUs, VRAM per GPU, CPU,
RAM, allowed GPU models and CUDA versions, GPU sharing, and whether the job runs a command. Once a job of
a shape fails to fit in a scheduling pass, every later job of that shape at least as long fails too, so
the scheduler asks a shape for its next job *shorter than* a bound (``ShapeQueue.next_after``): each
shape's jobs are kept in chunks that know their shortest job, and a chunk with none shorter is passed over
whole. A step then costs what changed (the jobs placed, submitted, finished), not the length of the queue.

Jobs without a ``Job`` (invalid specs) are never in the index: neither pass considers them.

The index is the fast path of one parameter, ``ControllerConfig.pending_index``; ``False`` walks every
pending job as the passes did before the index (sorting them all each pass): the reference the index must
match decision for decision (tests/engine/test_incremental_equivalence.py).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from scalar.domain.packing_model import Job

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CHUNK = 256  # a chunk splits in two past twice this many jobs

OrderKey = tuple[int, bool, datetime, int]
Shape = tuple[object, ...]


def order_key(job: Job, seq: int) -> OrderKey:
    """``order_pending``'s sort key with ``seq`` (when the job became PENDING) breaking full ties."""
    submitted = job.submitted_at
    return (-job.priority, submitted is None, _EPOCH if submitted is None else submitted, seq)


def shape_of(job: Job, command: bool) -> Shape:
    return (
        job.tier,
        job.gpu_count,
        job.vram_per_gpu_gb,
        job.cpu_cores,
        job.ram_gb,
        job.gpu_models,
        job.cuda_versions,
        job.share_gpu,
        command,
    )


class ShapeQueue:
    """One shape's pending jobs in queue order: sorted chunks of (order key, job id, expected duration),
    each chunk with its shortest duration."""

    __slots__ = ("durations", "firsts", "ids", "keys", "mins")

    def __init__(self) -> None:
        self.keys: list[list[OrderKey]] = []
        self.ids: list[list[str]] = []
        self.durations: list[list[float]] = []
        self.mins: list[float] = []
        self.firsts: list[OrderKey] = []

    def __len__(self) -> int:
        return sum(len(k) for k in self.keys)

    def __bool__(self) -> bool:
        return bool(self.keys)

    def _chunk(self, key: OrderKey) -> int:
        return max(0, bisect_right(self.firsts, key) - 1)

    def add(self, key: OrderKey, job_id: str, duration: float) -> None:
        if not self.keys:
            self.keys.append([key])
            self.ids.append([job_id])
            self.durations.append([duration])
            self.mins.append(duration)
            self.firsts.append(key)
            return
        ci = self._chunk(key)
        keys = self.keys[ci]
        pos = bisect_left(keys, key)
        keys.insert(pos, key)
        self.ids[ci].insert(pos, job_id)
        self.durations[ci].insert(pos, duration)
        self.mins[ci] = min(self.mins[ci], duration)
        self.firsts[ci] = keys[0]
        if len(keys) > 2 * _CHUNK:
            self._split(ci)

    def _split(self, ci: int) -> None:
        keys, ids, durs = self.keys[ci], self.ids[ci], self.durations[ci]
        half = len(keys) // 2
        self.keys[ci : ci + 1] = [keys[:half], keys[half:]]
        self.ids[ci : ci + 1] = [ids[:half], ids[half:]]
        self.durations[ci : ci + 1] = [durs[:half], durs[half:]]
        self.mins[ci : ci + 1] = [min(durs[:half]), min(durs[half:])]
        self.firsts[ci : ci + 1] = [keys[0], keys[half]]

    def remove(self, key: OrderKey) -> None:
        ci = self._chunk(key)
        keys = self.keys[ci]
        pos = bisect_left(keys, key)
        if pos >= len(keys) or keys[pos] != key:
            raise KeyError(key)
        del keys[pos]
        del self.ids[ci][pos]
        duration = self.durations[ci].pop(pos)
        if not keys:
            del self.keys[ci], self.ids[ci], self.durations[ci], self.mins[ci], self.firsts[ci]
            return
        self.firsts[ci] = keys[0]
        if duration <= self.mins[ci]:
            self.mins[ci] = min(self.durations[ci])

    def next_after(
        self, key: OrderKey | None, shorter_than: float = float("inf")
    ) -> tuple[OrderKey, str] | None:
        """The first job after ``key`` (from the start when None) whose duration is below ``shorter_than``."""
        n = len(self.keys)
        if key is None:
            ci, pos = 0, 0
        else:
            ci = self._chunk(key)
            pos = bisect_right(self.keys[ci], key) if n else 0
        while ci < n:
            if self.mins[ci] < shorter_than:
                durs = self.durations[ci]
                for i in range(pos, len(durs)):
                    if durs[i] < shorter_than:
                        return self.keys[ci][i], self.ids[ci][i]
            ci += 1
            pos = 0
        return None

    def __iter__(self) -> Iterator[tuple[OrderKey, str]]:
        for keys, ids in zip(self.keys, self.ids, strict=True):
            yield from zip(keys, ids, strict=True)


class PendingIndex:
    """Every pending job (with a ``Job``) under its shape, by order key."""

    def __init__(self) -> None:
        self.seq = 0
        self.entries: dict[str, tuple[OrderKey, Shape]] = {}
        self.queues: dict[Shape, ShapeQueue] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, job_id: str, job: Job, command: bool, key: OrderKey | None = None) -> None:
        """Index a job that became PENDING; ``key``: the one it had (a restored snapshot), else a new one."""
        if job_id in self.entries:
            return
        if key is None:
            self.seq += 1
            key = order_key(job, self.seq)
        shape = shape_of(job, command)
        self.entries[job_id] = (key, shape)
        queue = self.queues.get(shape)
        if queue is None:
            queue = self.queues[shape] = ShapeQueue()
        queue.add(key, job_id, job.expected_duration_sec)

    def remove(self, job_id: str) -> None:
        found = self.entries.pop(job_id, None)
        if found is None:
            return
        key, shape = found
        queue = self.queues[shape]
        queue.remove(key)
        if not queue:
            del self.queues[shape]

    def key(self, job_id: str) -> OrderKey:
        return self.entries[job_id][0]

    def shape(self, job_id: str) -> Shape:
        return self.entries[job_id][1]

    def ordered(self, shapes: Iterable[Shape] | None = None) -> Iterator[str]:
        """The pending job ids of ``shapes`` (default all) in queue order, merged lazily."""
        chosen = self.queues.values() if shapes is None else [self.queues[s] for s in shapes]
        for _, job_id in heapq.merge(*chosen):
            yield job_id
