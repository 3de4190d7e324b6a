"""Curate the published GPU price files into the data the package ships.

Reads ``data/prices`` (the raw SkyPilot catalog extracts and the AWS Spot Advisor data, see its
README) and writes ``src/scalar/providers/catalog/data/``: one CSV per source with the columns the loader
reads, rows in source order, values verbatim (no price is changed here: every anomaly is detected and
flagged at load time, where tests pin it), plus ``manifest.json`` recording each source's SHA-256 and
row count. Running it twice gives byte-identical output.

    .venv/bin/python scripts/curate_prices.py [--source DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO / "data" / "prices"
DEFAULT_OUT = REPO / "src" / "scalar" / "providers" / "catalog" / "data"

# curated file -> (source file, where the source came from, columns kept in this order)
TABLES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "aws_vms.csv": (
        "aws_gpu_skypilot_v8.csv",
        "skypilot-org/skypilot-catalog catalogs/v8/aws/vms.csv (GPU families subset)",
        (
            "InstanceType",
            "AcceleratorName",
            "AcceleratorCount",
            "vCPUs",
            "MemoryGiB",
            "GpuMemoryMiBPerGpu",
            "Price",
            "SpotPrice",
            "Region",
            "AvailabilityZone",
        ),
    ),
    "azure_vms.csv": (
        "azure_gpu_skypilot_v6.csv",
        "skypilot-org/skypilot-catalog catalogs/v6/azure/vms.csv (GPU rows, US regions)",
        (
            "InstanceType",
            "AcceleratorName",
            "AcceleratorCount",
            "vCPUs",
            "MemoryGiB",
            "Price",
            "SpotPrice",
            "Region",
        ),
    ),
    "gcp_accelerators.csv": (
        "gcp_gpu_accelerators_skypilot_v8.csv",
        "skypilot-org/skypilot-catalog catalogs/v8/gcp/vms.csv (accelerator-only rows)",
        (
            "AcceleratorName",
            "AcceleratorCount",
            "GpuMemoryMiBPerGpu",
            "Region",
            "AvailabilityZone",
            "Price",
            "SpotPrice",
        ),
    ),
    "gcp_host_vms.csv": (
        "gcp_gpu_hostvm_skypilot_v8.csv",
        "skypilot-org/skypilot-catalog catalogs/v8/gcp/vms.csv (a2/a3/a4 host VM rows)",
        ("InstanceType", "vCPUs", "MemoryGiB", "Region", "AvailabilityZone", "Price", "SpotPrice"),
    ),
    "prime_vms.csv": (
        "primeintellect_gpu_skypilot_v8.csv",
        "skypilot-org/skypilot-catalog catalogs/v8/primeintellect/vms.csv",
        (
            "InstanceType",
            "UpstreamCloudId",
            "AcceleratorName",
            "AcceleratorCount",
            "GpuMemoryMiBPerGpu",
            "vCPUs",
            "MemoryGiB",
            "Price",
            "SpotPrice",
            "Region",
            "AvailabilityZone",
        ),
    ),
    "runpod_vms.csv": (
        "runpod_gpu_skypilot_v7.csv",
        "skypilot-org/skypilot-catalog catalogs/v7/runpod/vms.csv (secure cloud)",
        (
            "InstanceType",
            "AcceleratorName",
            "AcceleratorCount",
            "vCPUs",
            "MemoryGiB",
            "Price",
            "SpotPrice",
            "Region",
            "AvailabilityZone",
        ),
    ),
}

SPOT_ADVISOR_SOURCE = "aws_spot_advisor_gpu.json"
SPOT_ADVISOR_OUT = "aws_spot_advisor.csv"
SPOT_ADVISOR_COLUMNS = ("region", "instance_type", "interruption_range_index", "savings_pct_vs_ondemand")


def _csv_text(columns: tuple[str, ...], rows: list[dict[str, str]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([row[column] for column in columns])
    return buffer.getvalue()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _curate_table(source: Path, columns: tuple[str, ...]) -> tuple[str, int]:
    with source.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [column for column in columns if column not in (reader.fieldnames or [])]
        if missing:
            raise SystemExit(f"{source.name}: missing columns {missing}")
        rows = [{column: (row[column] or "").strip() for column in columns} for row in reader]
    return _csv_text(columns, rows), len(rows)


def _curate_spot_advisor(source: Path) -> tuple[str, int, int]:
    data = json.loads(source.read_text(encoding="utf-8"))
    rows: list[dict[str, str]] = []
    published = 0
    for region in sorted(data["spot_advisor"]):
        by_os = data["spot_advisor"][region]
        published += sum(len(types) for types in by_os.values())
        # SkyPilot's prices are Linux prices, so only the Linux advice applies to them.
        for instance_type in sorted(by_os.get("Linux", {})):
            advice = by_os["Linux"][instance_type]
            rows.append(
                {
                    "region": region,
                    "instance_type": instance_type,
                    "interruption_range_index": str(int(advice["r"])),
                    "savings_pct_vs_ondemand": str(int(advice["s"])),
                }
            )
    return _csv_text(SPOT_ADVISOR_COLUMNS, rows), len(rows), published


def curate(source_dir: Path, out_dir: Path) -> dict[str, object]:
    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, object] = {}
    for name, (source_name, origin, columns) in TABLES.items():
        source = source_dir / source_name
        text, count = _curate_table(source, columns)
        (out_dir / name).write_text(text, encoding="utf-8")
        files[name] = {
            "source_file": source_name,
            "source_sha256": _sha256(source),
            "origin": origin,
            "rows": count,
            "columns": list(columns),
        }
    source = source_dir / SPOT_ADVISOR_SOURCE
    text, count, published = _curate_spot_advisor(source)
    (out_dir / SPOT_ADVISOR_OUT).write_text(text, encoding="utf-8")
    data = json.loads(source.read_text(encoding="utf-8"))
    files[SPOT_ADVISOR_OUT] = {
        "source_file": SPOT_ADVISOR_SOURCE,
        "source_sha256": _sha256(source),
        "origin": data.get("_source", ""),
        "rows": count,
        "source_rows_all_os": published,
        "columns": list(SPOT_ADVISOR_COLUMNS),
        "filter": "Linux advice only",
        "interruption_ranges": data["ranges"],
    }
    manifest: dict[str, object] = {
        "generated_by": "scripts/curate_prices.py",
        "note": "Values are copied verbatim; anomalies are flagged by the loader, not fixed here.",
        "files": files,
    }
    (out_dir / "manifest.json").write_text(
        json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--source", type=Path, default=DEFAULT_SOURCE, help="directory of the published files"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="package data directory to write")
    args = parser.parse_args(argv)
    manifest = curate(args.source, args.out)
    files = manifest["files"]
    assert isinstance(files, dict)
    for name, info in files.items():
        print(f"{name}: {info['rows']} rows from {info['source_file']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
