"""Benchmarks: `make bench` runs them and writes BENCHMARKS.md."""
