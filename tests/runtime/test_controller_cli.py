"""``scalar controller``: a bad configuration is refused with the key named, exit 2, no traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult


def test_a_bad_config_names_the_key(run_cli: Callable[..., CliResult], tmp_path: Path) -> None:
    config = tmp_path / "scalar.toml"
    config.write_text("[lease]\nttl_s = 0\n")
    result = run_cli("controller", "--config", config, "--data-dir", tmp_path)
    assert result.returncode == 2
    assert "[lease].ttl_s: must be > 0" in result.stderr and str(config) in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow  # several controller processes
def test_a_missing_config_and_a_bad_time_scale_are_refused(
    run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    result = run_cli("controller", "--config", tmp_path / "none.toml")
    assert result.returncode == 2 and "does not exist" in result.stderr
    result = run_cli("controller", "--data-dir", tmp_path, "--time-scale", "-5")
    assert result.returncode == 2 and "--time-scale: must be > 0" in result.stderr
    assert "Traceback" not in result.stderr
