"""Protocol B in pieces: workload and model mapping, the market session and its ledger, the virtual-time
loop, the engine driver, the baselines, the lower bound and the metrics (see docs/simulator-dynamic.md)."""
