"""CI smoke run of Protocol B on a small window of the real Alibaba trace: it runs and the numbers are sane."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import pytest
from bench.protocol_b import END, START, plot_spend, plot_timeline, plot_tradeoff, render, write_section

from scalar.sim.dynamic.workload import WindowOptions
from scalar.sim.protocol_b import POLICIES, ProtocolBOptions, run_protocol_b
from scalar.sim.protocol_b_runs import summarize
from tests.conftest import DATA

pytestmark = pytest.mark.slow  # Protocol B on a window of the real trace

PODS = DATA / "traces" / "alibaba-gpu-v2023" / "openb_pod_list_default.csv"


@pytest.fixture(scope="module")
def smoke() -> dict:
    options = ProtocolBOptions(window=WindowOptions(start_day=117, window_days=0.15), seed=42)
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
    assert list(by) == list(POLICIES)
    bound = by["lower-bound"]["cost"]
    assert bound > 0 and by["lower-bound"]["ratio_to_lower_bound"] == 1.0
    for name, p in by.items():
        assert p["fast"]["finished"] + p["fast"]["refused"] == p["fast"]["jobs"], name
        assert p["cost"] >= bound, name
        assert p["ratio_to_lower_bound"] == pytest.approx(p["cost"] / bound, rel=1e-3), name
        assert 0.01 < p["cost_per_delivered_gpu_hour"] < 50, name
        assert p["preempted_gpu_hours"] >= 0 and p["interruptions"] >= 0, name
        if name != "lower-bound":
            assert p["paid_gpu_hours"] >= p["busy_gpu_hours"] > 0, name
            assert p["cost_curve"][-1] == pytest.approx(p["cost"], abs=0.02), name
    assert by["on-demand"]["interruptions"] == 0  # on-demand capacity is never interrupted
    assert sum(p["interruptions"] for p in by.values()) > 0  # spot capacity is, at scale 1
    assert by["scalar"]["fast"]["refused"] == 0 and by["scalar"]["flex"]["refused"] == 0


def test_the_bench_writes_its_section_and_plots(smoke: dict, tmp_path: Path) -> None:
    summary = summarize([smoke, smoke])
    scalar = next(p for p in summary["policies"] if p["policy"] == "scalar")
    assert scalar["cost_sd"] == 0 and scalar["killed_runs"] == 2 * smoke["policies"][0]["killed_runs"]
    assert set(summary["wins"]) == {"per-pod", "per-pod-fast", "karpenter", "ray-v2", "on-demand"}
    md = tmp_path / "BENCHMARKS.md"
    md.write_text("# Benchmarks\n\nProtocol A's own text.\n")
    plots = {k: tmp_path / f"{k}.png" for k in ("tradeoff", "timeline", "spend")}
    plot_tradeoff(summary, plots["tradeoff"])
    plot_timeline(smoke, plots["timeline"])
    plot_spend([smoke], plots["spend"])
    for path in plots.values():
        height, width, _ = matplotlib.image.imread(path).shape  # a real PNG, decoded
        assert width > 500 and height > 300
    section = render(
        [("matrix", "scalar simulate dynamic ...", summary)],
        "python -m bench.protocol_b",
        {k: p.name for k, p in plots.items()},
        "Reduced.",
    )
    write_section(md, section)
    text = md.read_text()
    assert "Protocol A's own text." in text and "Reduced." in text
    assert text.count(START) == 1 and text.count(END) == 1
    assert "| scalar |" in text and "(tradeoff.png)" in text
    write_section(md, "replaced")  # a rerun replaces only its own section
    text = md.read_text()
    assert (
        "Protocol A's own text." in text and "| scalar |" not in text and f"{START}\nreplaced\n{END}" in text
    )
