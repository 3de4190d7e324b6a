"""CI smoke run of Protocol B on a small window of the real Alibaba trace: it runs and the numbers are sane."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.png import decode_size
from bench.protocol_b import END, START, plot, render, verdicts, write_section

from scalar.sim.dynamic.workload import WindowOptions
from scalar.sim.protocol_b import ProtocolBOptions, run_protocol_b
from tests.conftest import DATA

PODS = DATA / "traces" / "alibaba-gpu-v2023" / "openb_pod_list_default.csv"


@pytest.fixture(scope="module")
def smoke() -> dict:
    options = ProtocolBOptions(window=WindowOptions(window_days=0.15), seed=42)
    return run_protocol_b(PODS, options).to_dict()


def test_the_window_is_real_and_every_pod_is_accounted_for(smoke: dict) -> None:
    wl = smoke["workload"]
    assert wl["pods_read"] == 8152
    assert wl["jobs"] > 20
    assert wl["jobs"] + sum(wl["skipped"].values()) == wl["pods_read"]
    assert wl["skipped"]["cpu_only"] == 1088
    assert set(wl["tiers"]) == {"FAST", "FLEX"}
    assert sum(r["pods"] for r in wl["mapping"]) == wl["jobs"]


def test_every_policy_runs_every_job_at_a_sane_price(smoke: dict) -> None:
    by = {p["policy"]: p for p in smoke["policies"]}
    assert set(by) == {"scalar", "karpenter", "ray-v2", "on-demand", "lower-bound"}
    bound = by["lower-bound"]["cost"]
    assert bound > 0
    for name, p in by.items():
        assert not p["timed_out"], name
        assert p["fast"]["finished"] + p["fast"]["refused"] == p["fast"]["jobs"], name
        assert p["cost"] >= bound, name
        assert 0.01 < p["cost_per_delivered_gpu_hour"] < 20, name
        if name != "lower-bound":
            assert p["paid_gpu_hours"] >= p["busy_gpu_hours"] > 0, name
            assert p["fast"]["wait_p99_s"] < 3600, name
    assert by["scalar"]["fast"]["refused"] == 0 and by["scalar"]["flex"]["refused"] == 0
    assert by["on-demand"]["cost"] > by["scalar"]["cost"]  # the same packing, dearer capacity


def test_the_bench_writes_its_section_and_plot(smoke: dict, tmp_path: Path) -> None:
    md = tmp_path / "BENCHMARKS.md"
    md.write_text("# Benchmarks\n\nProtocol A's own text.\n")
    png = tmp_path / "b.png"
    plot(smoke, png)
    assert decode_size(png.read_bytes()) == (960, 420)
    write_section(md, render(smoke, "python -m bench.protocol_b", "b.png"))
    text = md.read_text()
    assert "Protocol A's own text." in text
    assert text.count(START) == 1 and text.count(END) == 1
    assert "| scalar |" in text and "![cost and FAST p99 wait per policy](b.png)" in text
    write_section(md, "replaced")  # a rerun replaces only its own section
    text = md.read_text()
    assert (
        "Protocol A's own text." in text and "| scalar |" not in text and f"{START}\nreplaced\n{END}" in text
    )
    assert any(v.startswith("FAST p99 wait under 10 minutes") for v in verdicts(smoke))
