"""Reading the Alibaba v2023 trace CSVs: good files parse; every bad one names file, line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalar.sim.synthetic import generate
from scalar.sim.traces import (
    NodeSpec,
    PodSpec,
    TraceFormatError,
    parse_gpu_spec,
    read_nodes,
    read_pods,
    write_nodes,
    write_pods,
)

NODES = "sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0000,64000,262144,2,P100\nopenb-node-0001,32000,131072,0,\n"
PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
    "openb-pod-0001,6000,12288,1,460,V100M16|V100M32,BE,Running,427061,12902960,427061\n"
    "openb-pod-0002,88000,327680,8,1000,,Burstable,Succeeded,9437497,,\n"
    "openb-pod-0003,4000,8192,0,0,,BE,Pending,5,,\n"
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_reads_nodes_and_pods_of_the_trace_format(tmp_path: Path) -> None:
    nodes = read_nodes(write(tmp_path, "nodes.csv", NODES))
    assert nodes == [
        NodeSpec("openb-node-0000", 64000, 262144, 2, "P100"),
        NodeSpec("openb-node-0001", 32000, 131072, 0, ""),
    ]
    pods = read_pods(write(tmp_path, "pods.csv", PODS))
    assert [(p.name, p.num_gpu, p.gpu_milli, p.gpu_spec) for p in pods] == [
        ("openb-pod-0000", 1, 1000, ()),
        ("openb-pod-0001", 1, 460, ("V100M16", "V100M32")),
        ("openb-pod-0002", 8, 1000, ()),
        ("openb-pod-0003", 0, 0, ()),
    ]
    assert pods[1].shares_gpu and not pods[0].shares_gpu
    assert pods[2].total_gpu_milli == 8000
    assert pods[0].qos == "LS" and pods[0].deletion_time_s == 12537496 and pods[2].deletion_time_s is None


def test_reads_the_multigpu_lists_which_have_no_gpu_spec_column(tmp_path: Path) -> None:
    path = write(
        tmp_path, "multigpu.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,12000,16384,2,1000\n"
    )
    assert read_pods(path) == [PodSpec("p0", 12000, 16384, 2, 1000)]


def test_gpu_spec_lists_models_once_in_order() -> None:
    assert parse_gpu_spec("V100M16|V100M32|V100M32") == ("V100M16", "V100M32")
    assert parse_gpu_spec("") == () and parse_gpu_spec("nan") == ()


@pytest.mark.parametrize(
    ("text", "line", "column", "problem"),
    [
        ("sn,cpu_milli,gpu,model\nn0,1,1,T4\n", 1, "memory_mib", "missing column"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn0,1,2,x,T4\n", 2, "gpu", "got 'x'"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn0,-5,2,1,T4\n", 2, "cpu_milli", "got '-5'"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn0,1,2,1,T4\nn0,1,2,1,T4\n", 3, "sn", "duplicate node name"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn0,1,2,4,\n", 2, "model", "no GPU model"),
    ],
)
def test_bad_node_files_name_the_line_and_column(
    tmp_path: Path, text: str, line: int, column: str, problem: str
) -> None:
    path = write(tmp_path, "nodes.csv", text)
    with pytest.raises(TraceFormatError) as err:
        read_nodes(path)
    assert (err.value.line, err.value.column) == (line, column)
    assert problem in str(err.value) and str(path) in str(err.value)
    assert f"line {line}, column '{column}'" in str(err.value)


@pytest.mark.parametrize(
    ("row", "column", "problem"),
    [
        ("p0,12000,16384,1,abc", "gpu_milli", "got 'abc'"),
        ("p0,1.5,16384,1,1000", "cpu_milli", "got '1.5'"),
        ("p0,12000,16384,1,1200", "gpu_milli", "above 1000"),
        ("p0,12000,16384,0,500", "gpu_milli", "num_gpu is 0"),
        ("p0,12000,16384,2,0", "gpu_milli", "of 0 milli"),
        ("p0,12000,16384,2,500", "gpu_milli", "whole GPUs"),
        (",12000,16384,1,1000", "name", "empty pod name"),
    ],
)
def test_bad_pod_rows_name_the_line_and_column(tmp_path: Path, row: str, column: str, problem: str) -> None:
    path = write(tmp_path, "pods.csv", f"name,cpu_milli,memory_mib,num_gpu,gpu_milli\np-ok,1,1,0,0\n{row}\n")
    with pytest.raises(TraceFormatError) as err:
        read_pods(path)
    assert (err.value.line, err.value.column) == (3, column)
    assert problem in str(err.value)


def test_missing_empty_and_headerless_files(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="file not found"):
        read_pods(tmp_path / "nope.csv")
    with pytest.raises(TraceFormatError, match="is empty"):
        read_pods(write(tmp_path, "empty.csv", ""))
    with pytest.raises(TraceFormatError, match="has no pods"):
        read_pods(write(tmp_path, "header.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"))
    with pytest.raises(TraceFormatError, match="is a directory"):
        read_nodes(tmp_path)


def test_synthetic_traces_round_trip_through_the_csv_format(tmp_path: Path) -> None:
    nodes, pods = generate(9, n_nodes=25, n_pods=120)
    assert generate(9, n_nodes=25, n_pods=120) == (nodes, pods)
    write_nodes(tmp_path / "n.csv", nodes)
    write_pods(tmp_path / "p.csv", pods)
    assert read_nodes(tmp_path / "n.csv") == nodes
    assert read_pods(tmp_path / "p.csv") == pods
