"""Readers for the Alibaba cluster-trace-gpu-v2023 node and pod CSVs (any file of that format).

Node list columns: ``sn, cpu_milli, memory_mib, gpu, model`` (``model`` may be empty for CPU-only nodes).
Pod list columns: ``name, cpu_milli, memory_mib, num_gpu, gpu_milli`` and optionally ``gpu_spec`` (allowed
GPU models, ``|``-separated, empty = any), ``qos``, ``pod_phase``, ``creation_time``, ``deletion_time``,
``scheduled_time``. Other columns are ignored. A GPU is 1000 milli: ``gpu_milli < 1000`` means the pod shares
one GPU with others, ``gpu_milli == 1000`` means it takes ``num_gpu`` whole GPUs.

Every problem raises ``TraceFormatError`` naming the file, the line and the column.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from scalar.domain.errors import DomainError

GPU_MILLI = 1000


def checkout_trace_dir(name: str = "alibaba-gpu-v2023") -> Path | None:
    """The trace folder ``data/traces/<name>`` of a source checkout, or None outside one.

    The traces are kept in the repository's top-level ``data/`` folder (their upstream terms allow use for
    research or study; data/README.md) and are not part of the installed package, so an installed
    ``scalar`` finds them only when it runs from a checkout (``pip install -e .``).
    """
    root = Path(__file__).resolve().parents[3]
    folder = root / "data" / "traces" / name
    if (root / "pyproject.toml").is_file() and folder.is_dir():
        return folder
    return None


NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
POD_OPTIONAL_COLUMNS = ("gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time")


class TraceFormatError(DomainError):
    """A trace file cannot be read: says which file, line and column, and how to fix it."""

    def __init__(self, path: str, line: int | None, column: str | None, problem: str, hint: str) -> None:
        where = path
        if line is not None:
            where += f": line {line}"
        if column is not None:
            where += f", column '{column}'"
        self.path = path
        self.line = line
        self.column = column
        self.problem = problem
        super().__init__(f"{where}: {problem}.", hint)


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One machine of the trace: CPU in milli-cores, memory in MiB, whole GPUs of one model."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class PodSpec:
    """One pod of the trace. ``gpu_spec`` lists the GPU models it accepts (empty tuple = any)."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...] = ()
    qos: str = ""
    creation_time_s: int | None = None
    deletion_time_s: int | None = None

    @property
    def total_gpu_milli(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def shares_gpu(self) -> bool:
        return self.num_gpu == 1 and 0 < self.gpu_milli < GPU_MILLI


def _rows(path: Path, required: Sequence[str], kind: str) -> Iterator[tuple[int, dict[str, str]]]:
    source = str(path)
    if not path.exists():
        raise TraceFormatError(source, None, None, "file not found", f"give the path of a {kind} CSV file")
    if path.is_dir():
        raise TraceFormatError(source, None, None, "is a directory", f"give the path of a {kind} CSV file")
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise TraceFormatError(
            source, None, None, f"cannot be read ({exc})", "check the permissions"
        ) from None
    with handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise TraceFormatError(
                source, 1, None, "is empty", f"a {kind} CSV starts with a header line: {','.join(required)}"
            ) from None
        except (csv.Error, UnicodeDecodeError) as exc:
            raise TraceFormatError(
                source, 1, None, f"is not a readable CSV ({exc})", "save it as UTF-8 CSV"
            ) from None
        header = [h.strip() for h in header]
        for col in required:
            if col not in header:
                raise TraceFormatError(
                    source,
                    1,
                    col,
                    "missing column",
                    f"the header of a {kind} CSV must name these columns: {', '.join(required)}",
                )
        index = {name: i for i, name in enumerate(header)}
        try:
            for row in reader:
                line = reader.line_num
                if not row or all(not cell.strip() for cell in row):
                    continue
                values = {name: (row[i].strip() if i < len(row) else "") for name, i in index.items()}
                yield line, values
        except (csv.Error, UnicodeDecodeError) as exc:
            raise TraceFormatError(
                source, reader.line_num, None, f"is not a readable CSV ({exc})", "save it as UTF-8 CSV"
            ) from None


def _int(source: str, line: int, column: str, text: str, *, optional: bool = False) -> int | None:
    if text == "" and optional:
        return None
    try:
        value = int(text)
    except ValueError:
        try:
            as_float = float(text)
        except ValueError:
            as_float = None
        if as_float is not None and as_float.is_integer():
            value = int(as_float)
        else:
            raise TraceFormatError(
                source,
                line,
                column,
                f"expected a whole non-negative number, got {text!r}",
                "fix or remove that row",
            ) from None
    if value < 0:
        raise TraceFormatError(
            source,
            line,
            column,
            f"expected a whole non-negative number, got {text!r}",
            "fix or remove that row",
        )
    return value


def _req_int(source: str, line: int, column: str, text: str) -> int:
    value = _int(source, line, column, text)
    assert value is not None
    return value


def read_nodes(path: Path | str) -> list[NodeSpec]:
    """Read a node list (``openb_node_list_*.csv`` format)."""
    p = Path(path)
    source = str(path)
    nodes: list[NodeSpec] = []
    seen: dict[str, int] = {}
    for line, row in _rows(p, NODE_COLUMNS, "node list"):
        name = row["sn"]
        if not name:
            raise TraceFormatError(source, line, "sn", "empty node name", "give every node a unique name")
        if name in seen:
            raise TraceFormatError(
                source,
                line,
                "sn",
                f"duplicate node name {name!r} (first on line {seen[name]})",
                "make names unique",
            )
        seen[name] = line
        gpus = _req_int(source, line, "gpu", row["gpu"])
        model = row["model"]
        if model.lower() == "nan":
            model = ""
        if gpus > 0 and not model:
            raise TraceFormatError(
                source,
                line,
                "model",
                f"node has {gpus} GPUs but no GPU model",
                "name the model (e.g. T4, V100M16)",
            )
        nodes.append(
            NodeSpec(
                name=name,
                cpu_milli=_req_int(source, line, "cpu_milli", row["cpu_milli"]),
                memory_mib=_req_int(source, line, "memory_mib", row["memory_mib"]),
                gpus=gpus,
                model=model if gpus > 0 else "",
            )
        )
    if not nodes:
        raise TraceFormatError(
            source, None, None, "has no nodes", "add at least one node row under the header"
        )
    return nodes


def parse_gpu_spec(text: str) -> tuple[str, ...]:
    """``"V100M16|V100M32"`` -> ``("V100M16", "V100M32")``; empty or ``nan`` -> ``()`` (any model)."""
    if not text or text.lower() == "nan":
        return ()
    models = []
    for part in text.split("|"):
        part = part.strip()
        if part and part not in models:
            models.append(part)
    return tuple(models)


def read_pods(path: Path | str) -> list[PodSpec]:
    """Read a pod list (``openb_pod_list_*.csv`` format)."""
    p = Path(path)
    source = str(path)
    pods: list[PodSpec] = []
    for line, row in _rows(p, POD_COLUMNS, "pod list"):
        name = row["name"]
        if not name:
            raise TraceFormatError(source, line, "name", "empty pod name", "give every pod a name")
        num_gpu = _req_int(source, line, "num_gpu", row["num_gpu"])
        gpu_milli = _req_int(source, line, "gpu_milli", row["gpu_milli"])
        if gpu_milli > GPU_MILLI:
            raise TraceFormatError(
                source,
                line,
                "gpu_milli",
                f"{gpu_milli} is above {GPU_MILLI} (one whole GPU)",
                "use num_gpu for more",
            )
        if num_gpu == 0 and gpu_milli != 0:
            raise TraceFormatError(
                source,
                line,
                "gpu_milli",
                f"pod asks {gpu_milli} GPU milli but num_gpu is 0",
                "set num_gpu or 0 milli",
            )
        if num_gpu > 0 and gpu_milli == 0:
            raise TraceFormatError(
                source,
                line,
                "gpu_milli",
                f"pod asks {num_gpu} GPUs of 0 milli",
                "give the milli per GPU (1..1000)",
            )
        if num_gpu > 1 and gpu_milli != GPU_MILLI:
            raise TraceFormatError(
                source,
                line,
                "gpu_milli",
                f"a pod with {num_gpu} GPUs must take whole GPUs (1000 milli), got {gpu_milli}",
                "only single-GPU pods share a GPU",
            )
        pods.append(
            PodSpec(
                name=name,
                cpu_milli=_req_int(source, line, "cpu_milli", row["cpu_milli"]),
                memory_mib=_req_int(source, line, "memory_mib", row["memory_mib"]),
                num_gpu=num_gpu,
                gpu_milli=gpu_milli,
                gpu_spec=parse_gpu_spec(row.get("gpu_spec", "")),
                qos=row.get("qos", ""),
                creation_time_s=_int(
                    source, line, "creation_time", row.get("creation_time", ""), optional=True
                ),
                deletion_time_s=_int(
                    source, line, "deletion_time", row.get("deletion_time", ""), optional=True
                ),
            )
        )
    if not pods:
        raise TraceFormatError(source, None, None, "has no pods", "add at least one pod row under the header")
    return pods


def write_nodes(path: Path | str, nodes: Sequence[NodeSpec]) -> None:
    """Write nodes in the trace's node-list format."""
    with Path(path).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(NODE_COLUMNS)
        for n in nodes:
            writer.writerow([n.name, n.cpu_milli, n.memory_mib, n.gpus, n.model])


def write_pods(path: Path | str, pods: Sequence[PodSpec]) -> None:
    """Write pods in the trace's pod-list format (name .. gpu_spec, qos)."""
    with Path(path).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*POD_COLUMNS, "gpu_spec", "qos"])
        for p in pods:
            writer.writerow(
                [p.name, p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, "|".join(p.gpu_spec), p.qos]
            )
