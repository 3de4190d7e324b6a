"""``python -m scalar.cli.demo_work --a100-seconds N``: a job that does a fixed amount of work.

It sleeps ``N / relative_throughput(model)`` seconds, ``model`` being the GPU model its node agent put in
``$SCALAR_GPU_MODEL`` (``docs/agent.md``): an A100-hour of work takes 19 minutes on an H100 and 2.5 hours
on a V100, as the engine expects of FLEX work (``domain.contracts.work_rate``) and as the built-in market
runs the demo's jobs. Without a known model (no agent, no GPU, a model the registry does not know) it runs
at the A100's speed. ``--print`` prints the seconds instead of sleeping.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Mapping, Sequence

from scalar.domain.errors import UnknownGpuModelError
from scalar.domain.gpus import relative_throughput


def run_seconds(a100_seconds: float, model: str | None) -> float:
    """How long ``a100_seconds`` of work runs on ``model`` (the first of a comma list; unknown: as an A100)."""
    name = (model or "").split(",")[0].strip()
    try:
        rate = relative_throughput(name) if name else 1.0
    except UnknownGpuModelError:
        rate = 1.0
    return a100_seconds / rate if math.isfinite(rate) and rate > 0 else a100_seconds


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] = os.environ) -> float:
    parser = argparse.ArgumentParser(
        prog="python -m scalar.cli.demo_work", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--a100-seconds", type=float, required=True, help="the work, in seconds on an A100")
    parser.add_argument("--print", action="store_true", help="print the run time instead of sleeping it")
    args = parser.parse_args(argv)
    if not (math.isfinite(args.a100_seconds) and args.a100_seconds >= 0):
        parser.error("--a100-seconds must be a finite number >= 0")
    seconds = run_seconds(args.a100_seconds, environ.get("SCALAR_GPU_MODEL"))
    if args.print:
        sys.stdout.write(f"{seconds:.3f}\n")
    else:
        time.sleep(seconds)
    return seconds


if __name__ == "__main__":
    main()
