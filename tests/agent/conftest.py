"""Agents started by these tests run jobs as the test's own user (tests/agent/harness.py)."""

from __future__ import annotations

import pytest

from tests.agent.harness import same_user_agents

__all__ = ["same_user_agents"]


@pytest.fixture(autouse=True)
def _agents_run_jobs_as_the_test_user(same_user_agents: None) -> None:
    """Every test here: ``SCALAR_AGENT_JOB_USER=same-user``, no sandbox, this checkout importable."""
