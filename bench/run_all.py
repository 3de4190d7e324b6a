"""`make bench`: run every benchmark; each writes its own section of BENCHMARKS.md (cached by input and code)."""

from __future__ import annotations

import sys
import time

from bench import control_plane, failover, protocol_a, protocol_b, speed
from bench import dashboard as dashboard_bench
from bench import endpoints as endpoints_bench
from bench import load as load_bench
from scalar.cli.api import default_api_workers


def main() -> int:
    steps = (
        ("protocol A (static, FGD)", lambda: protocol_a.main([])),
        ("protocol B (dynamic, cost and waits)", lambda: protocol_b.main([])),
        ("speed (seed packer literal vs optimized, scalar vs best-fit)", lambda: speed.main([])),
        ("control plane (engine, database, idle CPU)", lambda: control_plane.main([])),
        ("serverless endpoints (bursty trace, scalers)", lambda: endpoints_bench.main([])),
        ("load (many HTTP clients, errors, latency)", lambda: load_bench.main([])),
        ("dashboard and lists (20,000 jobs, 1,000 nodes)", lambda: dashboard_bench.main([])),
        (
            "load: API processes side by side (1,000 nodes, 20,000 pending jobs)",
            lambda: load_bench.main(["--api-workers", f"0,{default_api_workers()}"]),
        ),
        ("failover (two replicas, two controllers, kill -9 of the leader)", lambda: failover.main([])),
    )
    failed = 0
    for title, run in steps:
        started = time.monotonic()
        print(f"== {title}", flush=True)
        code = run()
        if code:
            failed += 1
            print(f"!! {title} exited {code}", file=sys.stderr)
        print(f"== {title}: {time.monotonic() - started:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
