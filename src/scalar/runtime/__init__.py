"""Drives the engine in real time: loops, the leader lease, the action executor."""
