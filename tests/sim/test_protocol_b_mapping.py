"""Protocol B's workload: tiers from QoS, trace GPU models onto today's, windows, compression, skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalar.domain.tier import Tier
from scalar.sim.dynamic.mapping import ALL_MAPPED_MODELS, ModelMapper, tier_of
from scalar.sim.dynamic.workload import (
    SKIP_CPU_ONLY,
    SKIP_OUTSIDE,
    SKIP_PENDING,
    SKIP_UNMAPPED,
    SKIP_ZERO,
    WindowOptions,
    build_workload,
)
from scalar.sim.traces import TraceFormatError
from tests.sim.protocol_b_fixtures import market_offers, offer, write_pods


@pytest.mark.parametrize(
    ("qos", "tier"),
    [
        ("LS", Tier.FAST),
        ("Guaranteed", Tier.FAST),
        ("BE", Tier.FLEX),
        ("Burstable", Tier.FLEX),
        ("", Tier.FAST),
    ],
)
def test_qos_classes_map_to_tiers(qos: str, tier: Tier) -> None:
    assert tier_of(qos) is tier


def test_burstable_can_be_read_as_fast() -> None:
    assert tier_of("Burstable", burstable=Tier.FAST) is Tier.FAST
    assert tier_of("BE", burstable=Tier.FAST) is Tier.FLEX


def test_trace_models_map_by_memory_and_generation() -> None:
    mapper = ModelMapper(market_offers())
    assert mapper.one("T4") == ("T4",)
    assert mapper.one("P100") == ("V100",)  # Pascal 16 GB -> the next generation at 16 GB
    assert mapper.one("V100M16") == ("V100",)
    assert mapper.one("V100M32") == ("V100-32GB",)
    assert mapper.one("A10") == ("A10G",)  # A10 itself is not sold in this market
    assert mapper.one("G2") == ("A100",)
    assert mapper.one("G3") == ("A100-80GB",)


def test_a_sold_name_maps_to_itself_and_an_unsold_one_to_nothing() -> None:
    assert ModelMapper(market_offers()).one("H100") == ()
    with_h100 = [*market_offers(), offer("H100", 8, "2.40", vram=80.0)]
    assert ModelMapper(with_h100).one("h100") == ("H100",)


def test_a_spec_is_the_union_and_no_spec_is_every_mapped_model() -> None:
    mapper = ModelMapper(market_offers())
    assert mapper.models(("V100M16", "V100M32", "P100")) == ("V100", "V100-32GB")
    everything = mapper.models(())
    assert everything == tuple(m for m in ALL_MAPPED_MODELS if m in mapper.sold)
    assert set(everything) == {"T4", "V100", "V100-32GB", "A10G", "A100", "A100-80GB"}
    assert mapper.reference_vram_gb(("A10G", "A100")) == 22.35


def _pods(tmp_path: Path) -> Path:
    return write_pods(
        tmp_path / "pods.csv",
        [
            "cpu-only,4000,8192,0,0,,LS,Running,100,5000,100",
            "pending,8000,8192,1,1000,,BE,Pending,200,400,",
            "unmapped,8000,8192,1,1000,K80,LS,Running,300,900,300",
            "before,8000,8192,1,1000,,LS,Running,0,50,0",
            "zero,8000,8192,1,1000,,LS,Running,700,700,700",
            "straddles,8000,16384,1,1000,T4,LS,Running,60,3660,60",
            "shares,4000,8192,1,460,G2|T4,BE,Succeeded,1000,2800,1000",
            "gang,64000,262144,8,1000,,Burstable,Failed,2000,5600,2000",
            "runs-on,8000,8192,1,1000,,Guaranteed,Running,3000,,3000",
        ],
    )


def test_window_cuts_lives_and_counts_every_skipped_pod(tmp_path: Path) -> None:
    wl = build_workload(
        _pods(tmp_path), market_offers(), WindowOptions(start_day=100 / 86_400, window_days=5000 / 86_400)
    )
    assert wl.start_s == 100 and wl.end_s == 5100
    assert wl.skipped == {
        SKIP_CPU_ONLY: 1,
        SKIP_PENDING: 1,
        SKIP_UNMAPPED: 1,
        SKIP_OUTSIDE: 1,
        SKIP_ZERO: 1,
    }
    jobs = {j.job_id: j for j in wl.jobs}
    assert list(jobs) == ["straddles", "shares", "gang", "runs-on"]
    # alive when the window opens: arrives at its start with what is left of its life
    assert (jobs["straddles"].arrival_s, jobs["straddles"].duration_s) == (0.0, 3560.0)
    # alive when it closes: declared only up to the window's end
    assert (jobs["gang"].arrival_s, jobs["gang"].duration_s) == (1900.0, 3100.0)
    # no deletion time: runs until the trace's last timestamp (5600 s), cut to the window
    assert jobs["runs-on"].duration_s == 2100.0
    assert wl.clipped == 3
    assert wl.tiers == {"FAST": 2, "FLEX": 2}


def test_jobs_carry_tier_models_sharing_and_resources(tmp_path: Path) -> None:
    wl = build_workload(_pods(tmp_path), market_offers(), WindowOptions(start_day=0, window_days=1))
    jobs = {j.job_id: j for j in wl.jobs}
    shares = jobs["shares"]
    assert shares.tier is Tier.FLEX
    assert shares.models == ("A100", "T4")
    assert shares.share_gpu and shares.gpu_fraction == 0.46
    assert shares.vram_per_gpu_gb == pytest.approx(0.46 * 16.0)  # a share of the smallest allowed GPU
    assert shares.cpu_cores == 4.0 and shares.ram_gb == 8.0
    assert shares.demanded_gpu_hours == pytest.approx(0.46 * 1800 / 3600)
    gang = jobs["gang"]
    assert gang.tier is Tier.FLEX  # Burstable
    assert gang.gpu_count == 8 and not gang.share_gpu and gang.gpu_fraction == 1.0
    assert gang.models == ("T4", "V100", "V100-32GB", "A10G", "A100", "A100-80GB")
    assert jobs["runs-on"].tier is Tier.FAST  # Guaranteed


def test_compression_divides_arrivals_and_durations(tmp_path: Path) -> None:
    path = _pods(tmp_path)
    plain = build_workload(path, market_offers(), WindowOptions(start_day=0, window_days=1))
    fast = build_workload(path, market_offers(), WindowOptions(start_day=0, window_days=1, compress=4))
    for a, b in zip(plain.jobs, fast.jobs, strict=True):
        assert b.arrival_s == pytest.approx(a.arrival_s / 4)
        assert b.duration_s == pytest.approx(a.duration_s / 4)
    assert fast.horizon_s == pytest.approx(plain.horizon_s / 4)


def test_mapping_report_counts_pods_per_model(tmp_path: Path) -> None:
    wl = build_workload(_pods(tmp_path), market_offers(), WindowOptions(start_day=0, window_days=1))
    rows = {r.trace_models: r for r in wl.mapping}
    assert rows["G2|T4"].models == ("A100", "T4") and rows["G2|T4"].pods == 1
    assert rows["T4"].pods == 1
    assert rows["any"].pods == 3
    assert wl.pods_per_model() == {
        "A100": 4,
        "A100-80GB": 3,
        "A10G": 3,
        "T4": 5,
        "V100": 3,
        "V100-32GB": 3,
    }


def test_default_window_opens_on_the_day_arrivals_begin(tmp_path: Path) -> None:
    rows = [
        f"p{i},4000,8192,1,1000,,LS,Running,{3 * 86_400 + i * 60},{3 * 86_400 + i * 60 + 600},"
        for i in range(40)
    ]
    rows.append("early,4000,8192,1,1000,,LS,Running,10,20,")
    wl = build_workload(write_pods(tmp_path / "p.csv", rows), market_offers(), WindowOptions(window_days=1))
    assert wl.start_s == 3 * 86_400
    assert wl.skipped[SKIP_OUTSIDE] == 1


def test_a_bad_row_names_the_file_line_and_column(tmp_path: Path) -> None:
    path = write_pods(
        tmp_path / "bad.csv",
        ["ok,4000,8192,1,1000,,LS,Running,0,10,0", "bad,4000,8192,x,1000,,LS,Running,0,10,0"],
    )
    with pytest.raises(TraceFormatError) as err:
        build_workload(path, market_offers())
    assert "bad.csv: line 3, column 'num_gpu'" in str(err.value)


def test_window_options_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="compress"):
        WindowOptions(compress=0.5)
    with pytest.raises(ValueError, match="window_days"):
        WindowOptions(window_days=0)
