"""``scalar submit`` against a live API server (a real control plane on a fresh SQLite database, opened but
not started, behind real HTTP): what a submission sent is read back from the store."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scalar.runtime import ControlPlane
from tests.api.real_control_plane import opened_api, stored_jobs
from tests.conftest import CliResult

Run = Callable[..., CliResult]


@pytest.fixture
def served(sqlite_url: str, tmp_path: Path) -> Iterator[tuple[str, ControlPlane]]:
    with opened_api(sqlite_url, tmp_path / "data") as pair:
        yield pair


@pytest.fixture
def cp(served: tuple[str, ControlPlane]) -> ControlPlane:
    return served[1]


@pytest.fixture
def server(served: tuple[str, ControlPlane]) -> str:
    return served[0]


def dead_server() -> str:
    """A loopback URL where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def assert_usage_error(result: CliResult) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr


def test_flags_submit_the_job_and_print_its_id_and_state(run_cli: Run, server: str, cp: ControlPlane) -> None:
    result = run_cli(
        "submit", "--server", server, "--gpus", "4", "--vram-gb", "40", "--cpu", "16", "--ram-gb", "128",
        "--duration", "2m", "--tier", "flex", "--priority", "3", "--name", "sweep",
        "--gpu-model", "H100", "--gpu-model", "H200",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    (stored,) = stored_jobs(cp)
    job_id = stored["id"]
    assert f"submitted job {job_id} (sweep), PENDING: {stored['reason']}" in result.stdout
    assert f"scalar jobs {job_id}" in result.stdout
    sent = {
        "tier": "FLEX",
        "gpu_count": 4,
        "vram_per_gpu_gb": 40.0,
        "cpu_cores": 16.0,
        "ram_gb": 128.0,
        "expected_duration_sec": 120.0,
        "priority": 3,
        "name": "sweep",
        "gpu_models": ["H100", "H200"],
        "share_gpu": False,
    }
    assert {k: stored[k] for k in sent} == sent


def test_defaults_are_a_fast_job_of_one_hour_and_json_prints_the_job(
    run_cli: Run, server: str, cp: ControlPlane
) -> None:
    result = run_cli("submit", "--server", server, "--gpus", "1", "--json")

    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    (stored,) = stored_jobs(cp)
    assert (job["id"], job["state"], job["tier"]) == (stored["id"], "PENDING", "FAST")
    assert stored["expected_duration_sec"] == 3600.0


def test_a_file_is_the_post_body_and_flags_override_its_fields(
    run_cli: Run, server: str, cp: ControlPlane, tmp_path: Path
) -> None:
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"tier": "FAST", "gpu_count": 2, "vram_per_gpu_gb": 24, "name": "from-file"}))

    result = run_cli("submit", "--server", server, "--file", job, "--name", "renamed")

    assert result.returncode == 0, result.stderr
    assert stored_jobs(cp)[0]["gpu_count"] == 2
    assert stored_jobs(cp)[0]["vram_per_gpu_gb"] == 24.0
    assert stored_jobs(cp)[0]["name"] == "renamed"


def test_a_bad_flag_is_named_with_its_fix_and_nothing_is_sent(
    run_cli: Run, server: str, cp: ControlPlane
) -> None:
    result = run_cli("submit", "--server", server, "--gpus", "-3", "--tier", "SLOW")

    assert_usage_error(result)
    assert "error: the job is invalid (2 problems)" in result.stderr
    assert "  --tier (tier): must be one of 'FAST' or 'FLEX'" in result.stderr
    assert "  --gpus (gpu_count): must be >= 0, got -3" in result.stderr
    assert "fix: give a whole number of GPUs" in result.stderr
    assert stored_jobs(cp) == []


def test_a_bad_file_field_names_the_file_and_the_field(
    run_cli: Run, server: str, cp: ControlPlane, tmp_path: Path
) -> None:
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"tier": "FAST", "gpus": 2}))

    result = run_cli("submit", "--server", server, "--file", job)

    assert_usage_error(result)
    assert f"{job}: field 'gpus': is not a known field" in result.stderr
    assert "did you mean 'gpu_count'?" in result.stderr
    assert f"{job}: field 'gpu_count': is required" in result.stderr
    assert stored_jobs(cp) == []


@pytest.mark.parametrize(
    ("content", "words"),
    [(None, "file not found"), ("{oops", "is not valid JSON"), ("[1]", "must hold a JSON object")],
)
def test_an_unreadable_file_is_a_usage_error(
    run_cli: Run, server: str, tmp_path: Path, content: str | None, words: str
) -> None:
    job = tmp_path / "job.json"
    if content is not None:
        job.write_text(content)

    result = run_cli("submit", "--server", server, "--file", job)

    assert_usage_error(result)
    assert str(job) in result.stderr and words in result.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((), "give the job's GPUs with --gpus N"),
        (("--gpus", "1", "--duration", "soon"), "--duration: must be seconds or a number with a unit"),
    ],
)
def test_missing_or_unreadable_flags_are_usage_errors(
    run_cli: Run, server: str, args: tuple[str, ...], words: str
) -> None:
    result = run_cli("submit", "--server", server, *args)

    assert_usage_error(result)
    assert words in result.stderr


def test_a_job_the_server_refuses_prints_its_reasons_and_exits_2(run_cli: Run, server: str) -> None:
    result = run_cli("submit", "--server", server, "--gpus", "4096", "--vram-gb", "80")

    assert_usage_error(result)
    lines = result.stderr.splitlines()
    # the reason (from the real market's offers) is printed as the server gave it, with its fix
    assert lines[0].startswith("error: job refused: needs 4096 GPUs; the most any offer or gang can hold is ")
    assert lines[1].startswith("  gpu_count: needs 4096 GPUs; the most any offer or gang can hold is ")
    have = lines[1].split("can hold is ", 1)[1].split()[0]
    assert lines[2].startswith(f"    fix: ask for at most {have} GPUs")


def test_an_unexpected_server_error_exits_1_without_internals(
    run_cli: Run, server: str, cp: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(fields: object) -> dict[str, object]:
        raise RuntimeError("secret internal detail /etc/passwd")

    monkeypatch.setattr(cp, "submit_job", broken)  # a fault inside the real plane, as a bug would raise
    result = run_cli("submit", "--server", server, "--gpus", "1")

    assert result.returncode == 1
    assert result.stderr.startswith("error: the server failed while answering")
    assert "secret" not in result.stderr and "Traceback" not in result.stderr


def test_server_down_exits_1_and_says_how_to_start_it(run_cli: Run) -> None:
    url = dead_server()

    result = run_cli("submit", "--server", url, "--gpus", "1")

    assert result.returncode == 1
    assert result.stderr.startswith(f"error: cannot reach the Scalar server at {url}")
    assert "`make run` or `scalar up`" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_server_comes_from_scalar_server_when_no_flag_is_given(
    run_cli: Run, server: str, cp: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCALAR_SERVER", server)

    result = run_cli("submit", "--gpus", "2")

    assert result.returncode == 0, result.stderr
    assert len(stored_jobs(cp)) == 1


def test_cuda_versions_and_ports_are_sent_and_bad_ones_named(
    run_cli: Run, server: str, cp: ControlPlane
) -> None:
    ok = run_cli(
        "submit", "--server", server, "--cuda", "12.4", "--cuda", "12.8", "--ports", "2", "-y",
        "--", "python", "serve.py",
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    sent = stored_jobs(cp)[0]
    assert sent["cuda_versions"] == ["12.4", "12.8"] and sent["ports"] == 2

    bad = run_cli("submit", "--server", server, "--cuda", "twelve", "--ports", "99", "--", "true")
    assert_usage_error(bad)
    assert "--cuda (cuda_versions[0])" in bad.stderr and "--ports (ports)" in bad.stderr
    assert len(stored_jobs(cp)) == 1
