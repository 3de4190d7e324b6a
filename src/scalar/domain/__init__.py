"""Scalar's pure decision core, one module per concern of the seeds.

No I/O, no clock reads, no unseeded randomness, no imports from the rest of scalar:
``now`` and ``rng`` are parameters, decisions are immutable values that carry their reasons.
"""
