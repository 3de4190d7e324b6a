"""One fixed scenario on a real control plane, for the snapshot tests.

A ``ControlPlane`` on a fresh SQLite database with the built-in market (two providers, seed 7), a fixed
clock (``tests.runtime.helpers.Clock``, 2026-03-02 09:00 UTC), a fixed lease holder and seeded job ids
(``SeededUuid``), driven by hand (``drive``: one leader step and the executor's actions per clock second),
never by threads. Six jobs are submitted: one finishes, one is cancelled, one is left waiting in the inbox;
a budget limit is set. The plane is then left at a fixed instant: every answer read from it afterwards is
a function of the code alone (``normalise.py`` lists the few exceptions).
"""

from __future__ import annotations

import datetime as dt
import random
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scalar.cli import main as cli
from scalar.runtime import ControlPlane
from scalar.runtime import jobs as runtime_jobs
from tests.runtime.helpers import Clock, drive, job, settings_for

HOLDER = "snapshot-holder"
FROZEN_PACKAGES = ("scalar.cli.", "scalar.web.")
JOBS = (
    job(1, 600, name="train-a"),
    job(2, 1200, name="train-b"),
    job(1, 900, tier="FLEX", name="flex-c"),
    job(1, 60, name="short-d"),
    job(1, 3600, name="long-e"),
)


@dataclass
class Scenario:
    plane: ControlPlane
    clock: Clock
    tmp_dir: str
    job_ids: dict[str, str]  # name -> id

    @property
    def now(self) -> dt.datetime:
        return self.clock.now


class SeededUuid:
    """Stands in for the ``uuid`` module where job ids are made (``runtime.jobs.new_job_id`` takes its
    random suffix from ``uuid.uuid4()``): the same ids every run. The code offers no other seam for it."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def uuid4(self) -> uuid.UUID:
        return uuid.UUID(int=self._rng.getrandbits(128), version=4)


def build(tmp: Path) -> Scenario:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runtime_jobs, "uuid", SeededUuid(2026))
        return _build(tmp)


def _build(tmp: Path) -> Scenario:
    clock = Clock()
    settings = settings_for(f"sqlite:///{tmp}/scalar.db", tmp, holder=HOLDER)
    plane = ControlPlane(settings, clock=clock, live_env={})
    plane.open()
    ids: dict[str, str] = {}
    for fields in JOBS:
        clock.advance(1)
        ids[fields["name"]] = plane.submit_job(fields).id
    drive([plane], clock, 90)
    plane.cancel_job(ids["long-e"])
    plane.put_budgets([{"scope": "global", "usd_per_hour": "5"}], actor="snapshot")
    drive([plane], clock, 30)
    clock.advance(1)
    ids["queued-f"] = plane.submit_job(job(4, 300, name="queued-f")).id  # accepted, not yet stepped
    return Scenario(plane, clock, str(tmp), ids)


@pytest.fixture(scope="session")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    """Built once per test process (a few seconds); the tests only read it."""
    built = build(tmp_path_factory.mktemp("snapshot"))
    try:
        yield built
    finally:
        built.plane.stop()


class _FrozenDatetime(dt.datetime):
    frozen: dt.datetime

    @classmethod
    def now(cls, tz: dt.tzinfo | None = None) -> Any:
        return cls.frozen if tz is None else cls.frozen.astimezone(tz)


@contextmanager
def frozen_now(monkeypatch: pytest.MonkeyPatch, at: dt.datetime) -> Iterator[None]:
    """``datetime.now()`` answers ``at`` in every loaded module of the CLI and the dashboard that imported
    ``datetime`` by name: they show times relative to the wall clock ("3m ago"). The control plane reads
    its injected clock; its modules are left alone (a patched class would fail their ``isinstance``)."""
    cli.build()  # imports every command's module now, so that none is first imported unpatched
    frozen = type("FrozenDatetime", (_FrozenDatetime,), {"frozen": at})
    with monkeypatch.context() as patch:
        for name, module in list(sys.modules.items()):
            if name.startswith(FROZEN_PACKAGES) and getattr(module, "datetime", None) is dt.datetime:
                patch.setattr(module, "datetime", frozen)
        yield
