"""The ``scalar`` command's output over the snapshot scenario, through its entry point
(``scalar.cli.main.main``, what the installed ``scalar`` script runs) against the API served on loopback:
on an 80-column terminal (``COLUMNS=80``) and with ``--json``. Run in-process, so that the clock the
command reads for "3m ago" can be the scenario's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scalar.api.app import create_app
from scalar.cli.main import main
from tests.api.live_server import serve
from tests.snapshots.conftest import Snapshot
from tests.snapshots.normalise import normalise_text
from tests.snapshots.scenario import Scenario, frozen_now

COMMANDS = {
    "jobs": ["jobs"],
    "jobs_wide": ["jobs", "--wide"],
    "jobs_running": ["jobs", "--state", "running"],
    "jobs_json": ["jobs", "--json"],
    "job_explain": ["explain", "{train-a}"],
    "job_explain_json": ["explain", "{train-a}", "--json"],
    "status": ["status"],
    "status_json": ["status", "--json"],
    "costs": ["costs"],
    "costs_json": ["costs", "--json"],
    "prices": ["prices", "--gpu-model", "V100"],
    "prices_json": ["prices", "--gpu-model", "V100", "--json"],
    "providers": ["providers"],
    "nodes": ["nodes"],
    "nodes_json": ["nodes", "--json"],
    "blocks": ["blocks"],
    "blocks_json": ["blocks", "--json"],
    "endpoints": ["endpoint", "list"],
    "error_unknown_job": ["explain", "job-20990101T000000-000000"],
    "error_bad_state": ["jobs", "--state", "sleeping"],
}


@pytest.fixture(scope="module")
def server(scenario: Scenario) -> Iterator[str]:
    with serve(create_app(scenario.plane)) as url:
        yield url


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command(
    name: str,
    server: str,
    scenario: Scenario,
    snapshot: Snapshot,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = [a.format(**scenario.job_ids) for a in COMMANDS[name]]
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("SCALAR_SERVER", server)
    monkeypatch.delenv("SCALAR_TOKEN", raising=False)
    monkeypatch.chdir(scenario.tmp_dir)  # no ./.scalar/admin.token to pick up
    code = 0
    with frozen_now(monkeypatch, scenario.now):
        try:
            main(args)
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
    out, err = capsys.readouterr()
    text = f"$ scalar {' '.join(COMMANDS[name])}\nexit {code}\n--- stdout\n{out}--- stderr\n{err}"
    snapshot(f"cli/{name}.txt", normalise_text(text, tmp_dir=scenario.tmp_dir))
