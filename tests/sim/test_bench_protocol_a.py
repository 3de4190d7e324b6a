"""CI smoke test of the Protocol A benchmark script: it runs, writes its section and a PNG, numbers sane."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.image
import pytest
from bench import protocol_a, report

from scalar.sim.synthetic import generate
from scalar.sim.traces import write_nodes, write_pods

pytestmark = pytest.mark.slow  # the Protocol A benchmark script, end to end


def test_bench_writes_its_section_and_plot(tmp_path: Path) -> None:
    nodes, pods = generate(2, n_nodes=30, n_pods=250)
    write_nodes(tmp_path / "nodes.csv", nodes)
    write_pods(tmp_path / "openb_pod_list_default.csv", pods)
    output = tmp_path / "BENCHMARKS.md"
    output.write_text("# Benchmarks\n\n<!-- other:start -->\nkept\n<!-- other:end -->\n")
    args = [
        "--nodes", str(tmp_path / "nodes.csv"), "--pods-dir", str(tmp_path), "--lists", "default",
        "--policies", "scalar,fgd,best-fit", "--seeds", "1-2", "--jobs", "1", "--no-speed",
        "--cache-dir", str(tmp_path / "cache"), "--output", str(output), "--plot", str(tmp_path / "a.png"),
    ]  # fmt: skip
    assert protocol_a.main(args) == 0
    text = output.read_text()
    assert "kept" in text and text.count(protocol_a.START) == 1 and text.count(protocol_a.END) == 1
    rows = {
        m.group(1): float(m.group(2))
        for m in re.finditer(r"^\| (\S+) \| (?:[\d.]+ \| ){5}([\d.]+) \|", text, re.M)
    }
    assert set(rows) == {"scalar", "fgd", "best-fit"}
    assert all(50.0 < v <= 100.0 for v in rows.values())
    height, width, _ = matplotlib.image.imread(tmp_path / "a.png").shape  # a real PNG, decoded
    assert (width, height) == tuple(round(inches * report.DPI) for inches in protocol_a.PLOT_SIZE)
    assert (
        len(list((tmp_path / "cache").glob("protocol_a-*.json"))) == 3 * 2 + 3 * 2
    )  # + the random tie-break
    # A rerun computes nothing and writes the same section.
    assert protocol_a.main(args) == 0
    assert output.read_text() == text
